package controllers

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

func TestAll(t *testing.T) {
	t.Parallel()
	errA, errB := errors.New("a"), errors.New("b")
	tests := []struct {
		name string
		errs []error
		want error
	}{
		{"none", nil, nil},
		{"all succeed", []error{nil, nil, nil}, nil},
		{"one fails", []error{nil, errB, nil}, errB},
		{"the first in order wins", []error{nil, errA, errB}, errA},
		{"whatever finishes first", []error{errB, errA}, errB},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var ran atomic.Int32
			fs := make([]func() error, len(tt.errs))
			for i, err := range tt.errs {
				fs[i] = func() error {
					// Later functions return first: the order of the
					// list, not of the returns, picks the error.
					time.Sleep(time.Duration(len(tt.errs)-i) * time.Millisecond)
					ran.Add(1)
					return err
				}
			}
			if got := all(fs...); !errors.Is(got, tt.want) || (tt.want == nil) != (got == nil) {
				t.Errorf("all() = %v, want %v", got, tt.want)
			}
			if int(ran.Load()) != len(tt.errs) {
				t.Errorf("%d of %d functions ran", ran.Load(), len(tt.errs))
			}
		})
	}
}
