package compaction

import "github.com/aerie-run/aerie/runner/provider"

// The spec's bounds of a cut.
const (
	// MinRemoved is the fewest messages a compaction replaces.
	MinRemoved = 4
	// MinTail and MaxTail bound the estimated tokens of the tail a
	// compaction keeps.
	MinTail = 2_000
	MaxTail = 8_000
)

// Cut is where a compaction divides a conversation: the messages before
// Index are replaced by the summary, those from Index on are kept as they
// are.
type Cut struct {
	// Index is the number of messages replaced, and the index of the first
	// one kept.
	Index int
	// TailTokens is the estimated tokens of the messages kept.
	TailTokens int64
}

// SelectCut chooses where to cut msgs (the conversation without its system
// prompt), given tail, the estimated tokens of the messages from an index
// on, and ceiling, the most a tail may keep when it cannot stay within the
// bounds (0: no limit). It returns false when no cut is viable: the
// conversation has fewer than MinRemoved messages.
//
// A cut replaces at least MinRemoved messages and never separates a tool
// call from its result: the first message kept is never a tool message, so
// the results of every call replaced are replaced with it. Among the cuts
// that keep between MinTail and MaxTail tokens it takes the one keeping the
// most. Message boundaries may allow none (one message of the tail is
// larger than the band); then it keeps the smallest tail above MaxTail, if
// that is within ceiling, so that a large recent tool result survives, and
// otherwise the largest tail under MinTail, down to keeping nothing but the
// summary.
func SelectCut(msgs []provider.Message, tail func(from int) int64, ceiling int64) (Cut, bool) {
	if len(msgs) < MinRemoved {
		return Cut{}, false
	}
	var inBand, above, below Cut
	found := [3]bool{}
	// Tails shrink as the cut moves later, so the first cut in the band is
	// the one keeping the most, the last above it the smallest above, and
	// the first below it the largest below.
	for i := MinRemoved; i <= len(msgs); i++ {
		if i < len(msgs) && msgs[i].Role == provider.RoleTool {
			continue
		}
		c := Cut{Index: i, TailTokens: tail(i)}
		switch {
		case c.TailTokens > MaxTail:
			above, found[1] = c, true
		case c.TailTokens >= MinTail:
			if !found[0] {
				inBand, found[0] = c, true
			}
		case !found[2]:
			below, found[2] = c, true
		}
	}
	switch {
	case found[0]:
		return inBand, true
	case found[1] && (ceiling <= 0 || above.TailTokens <= ceiling):
		return above, true
	case found[2]:
		return below, true
	}
	return Cut{}, false
}
