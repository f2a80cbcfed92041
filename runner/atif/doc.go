// Package atif writes a session as an Agent Trajectory Interchange Format
// document, version 1.7 (Harbor's RFC 0001, "trajectory-format"), for
// `aerie run --atif-output PATH` and `aerie session export --format atif`
// (which builds it from the store alone: SystemPromptUnrecorded). Package
// atiftest checks a document against the published schema.
//
// BuildTrajectory turns the session's journaled entries, exactly as the
// store returns them, into a Trajectory; it is a pure function, so the same
// session always gives the same document, and a session that was
// compacted, resumed or forked gives its whole history. WriteTrajectory
// then replaces the file at PATH atomically.
//
//	t, err := atif.BuildTrajectory(atif.TrajectoryInput{
//		Session:             sess,
//		Entries:             entries, // st.Entries(ctx, tenant, sess.ID)
//		SystemPrompt:        prompt,
//		IncludeSystemPrompt: plaintext, // --atif-system-prompt-plaintext
//		Agent:               atif.AgentInfo{Name: "aerie", Version: version},
//		Tools:               tools,
//		Outcome:             outcome,
//	})
//	if err == nil {
//		err = atif.WriteTrajectory(path, t)
//	}
//	if err != nil {
//		// A warning: the trajectory never changes the run's outcome.
//	}
//
// A session's subagents (TrajectoryInput.Subagents, recursively) are
// embedded in the one document as ATIF v1.7 subagent_trajectories, each
// referred to by the result of the call that spawned it.
//
// The system prompt is recorded as its SHA-256 digest; its text is included
// only when asked for, because it may hold what a project keeps private. The
// mapping of each kind of entry to ATIF steps is described on
// BuildTrajectory.
package atif
