// Package export renders a stored session for people and programs, from
// its record and its whole stream of entries as the session store returns
// them (compacted entries included, in sequence order): as an ATIF v1.7
// trajectory (package atif builds it, the same builder aerie run uses for
// --atif-output), as JSON Lines with one object per entry, or as a Markdown
// transcript a person reads.
//
//	err := export.Write(w, export.Markdown, export.Input{
//		Session: rec,     // the session's record
//		Entries: entries, // st.Entries(ctx, tenant, rec.ID)
//		Agent:   atif.AgentInfo{Name: "aerie", Version: version},
//	})
//
// A session's subagents come with it once LoadTree has read them through a
// ChildLoader (the caller's store): the ATIF trajectory embeds each as a
// subagent trajectory that the spawning call's result refers to, the
// Markdown transcript nests each under its outcome, right after the call
// that spawned it, and the JSON Lines follow the session's lines with each
// child's, depth first.
//
//	in, err := export.LoadTree(ctx, in, children) // children lists by parent
//
// Every format shows the full history: an entry a compaction checkpoint
// replaced in the model's context stays in the store and in the export,
// marked as compacted, before the checkpoint that replaced it.
package export
