package anthropic

import (
	"errors"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/aerie-run/aerie/runner/provider"
)

// apiError turns an SDK error into a *provider.APIError where there is one,
// and leaves every other error (connection, context) as it is.
func apiError(err error) error {
	var aerr *anthropic.Error
	if errors.As(err, &aerr) {
		return &provider.APIError{
			StatusCode: aerr.StatusCode,
			Type:       string(aerr.Type()),
			Code:       string(aerr.ErrorCode()),
			Message:    aerr.Message,
			RequestID:  aerr.RequestID,
			Err:        err,
		}
	}
	return err
}
