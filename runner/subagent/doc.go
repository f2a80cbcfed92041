// Package subagent spawns and runs child agents: the spawn_agent tool a
// session offers its model, the limits on a session tree's depth,
// concurrency and count, the Ledger every loop of the tree charges, and the
// set of a loop's running children that compaction's gates read.
//
// A child is a loop in the runner's process with its own session, journal,
// system prompt and tools; the session that spawns it makes and runs it
// (see Spawner). One Ledger belongs to the root: each loop's model is
// wrapped by Ledger.Model, which charges every response's usage as it
// arrives, and each loop stops on Ledger.Stop, which checks the root's
// budget against the tree's totals before each request. A spent budget so
// stops every agent of the tree at its next request. A call past a limit
// is an error result for the model that names the limit and its value,
// never a wait: a concurrency limit refuses, it does not queue.
package subagent
