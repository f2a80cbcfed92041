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
// Every format shows the full history: an entry a compaction checkpoint
// replaced in the model's context stays in the store and in the export,
// marked as compacted, before the checkpoint that replaced it.
package export
