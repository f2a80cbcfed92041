// Package transcript is the vocabulary of a session's stream: its entries,
// their payloads and the snapshot a session resumes from. It is a leaf:
// the agent loop, the journal and the event writers speak it without
// linking a database, and package store keeps it.
//
// # Entries
//
// A session's stream is a sequence of Entry values, numbered from 1 by the
// writer (see package journal) before they are queued. Each carries a typed
// Payload, one of the types of this package: messages (UserMessage,
// AssistantMessage, ToolResult), ToolCall and ToolCompletion records,
// ProviderChange, ModelChange, PersonaChange and ReasoningChange, Usage
// snapshots, completion Checkpoints, Compaction checkpoints, Fork metadata,
// SubagentOutcomes, the Layers record of the extension layers each run used,
// the HookVerdicts of lifecycle hooks, the ApprovalRequests and
// ApprovalDecisions of tool calls a hook asked a person about, and the
// WorkspaceDiff of what each run changed in its workspace. The set is
// closed: every kind a store holds has its decoder here. How a run ended is
// an Outcome, as checkpoints store it.
//
// Payloads are stored as JSON beside their EntryKind. EncodePayload makes
// that JSON and refuses a payload that could not be read back; DecodeEntry
// turns it back, and reports unknown kinds or corrupt payloads as an
// *EntryError naming the session and sequence number (ErrCorruptEntry), so
// that a store fails reading that session only.
//
// # Decoding
//
// Decoding payloads is most of the cost of resuming a long session.
// DecodeEntry decodes the kinds a conversation is made of in one pass
// without reflection, and hands whatever that fast path does not take
// (corrupt payloads included) to encoding/json, which also makes the errors;
// FuzzFastDecode holds the fast path to encoding/json's results.
//
// # Snapshots
//
// A Snapshot is what resuming needs: the latest Compaction's replacement,
// the active entries after it, the Settings (provider, model, persona,
// reasoning), Usage and completion Checkpoint in force at the end, and the
// last sequence number to continue from. Package store reads it (Load); the
// agent loop rebuilds its conversation from it.
package transcript
