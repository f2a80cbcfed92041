package runconfig

import (
	"testing"

	"github.com/aerie-run/aerie/runner/transcript"
)

// TestOutcomesMatchTranscript keeps the outcomes spelled here for the
// controller in step with the stored ones they stand for.
func TestOutcomesMatchTranscript(t *testing.T) {
	t.Parallel()
	for ours, stored := range map[string]transcript.Outcome{
		OutcomeCompleted:        transcript.OutcomeCompleted,
		OutcomeBudgetExceeded:   transcript.OutcomeBudgetExceeded,
		OutcomeDeadlineExceeded: transcript.OutcomeDeadlineExceeded,
		OutcomeCancelled:        transcript.OutcomeCancelled,
		OutcomeModelError:       transcript.OutcomeModelError,
		OutcomeFailed:           transcript.OutcomeFailed,
		OutcomeResultInvalid:    transcript.OutcomeResultInvalid,
	} {
		if ours != string(stored) {
			t.Errorf("runconfig spells outcome %q, the transcript stores %q", ours, stored)
		}
	}
}
