package transcript

// Settings are the model settings a session runs with. A session starts
// with the settings it was created with; its ProviderChange, ModelChange,
// PersonaChange and ReasoningChange entries change them from there on.
type Settings struct {
	Provider  string
	Model     string
	Persona   string
	Reasoning string
}

// Snapshot is what resuming a session needs, read in one consistent view.
type Snapshot struct {
	// Settings are those in force at the end of the stream: the session's
	// creation settings overridden by the latest change entries.
	Settings Settings
	// Compaction is the latest compaction checkpoint, whose Replacement
	// comes before Entries in the live context; nil if the session was never
	// compacted. CompactionSeq is its sequence number.
	Compaction    *Compaction
	CompactionSeq int64
	// Entries are the active entries (not compacted, compaction checkpoints
	// excluded) in sequence order: the tail after the replacement.
	Entries []Entry
	// Usage is the latest usage snapshot and Checkpoint the latest
	// completion checkpoint, compacted or not; nil if there is none.
	Usage      *Usage
	Checkpoint *Checkpoint
	// LastSeq is the highest stored sequence number: a journal writer
	// continuing the session starts at LastSeq+1.
	LastSeq int64
}
