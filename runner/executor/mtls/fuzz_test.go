package mtls

import (
	"bytes"
	"testing"
)

// FuzzParse: Parse never panics, and what it accepts marshals back to
// the same credential. The seed corpus under testdata/fuzz holds a valid
// runner's and executor's file and damaged ones.
func FuzzParse(f *testing.F) {
	runner, execs := newTestSet(f, "tools")
	f.Add(runner.Marshal())
	f.Add(execs["tools"].Marshal())
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data, "fuzz.pem")
		if err != nil {
			return
		}
		again, err := Parse(c.Marshal(), "again.pem")
		if err != nil {
			t.Fatalf("a parsed credential does not parse once marshalled: %v", err)
		}
		if again.Name() != c.Name() || !bytes.Equal(again.Marshal(), c.Marshal()) {
			t.Fatalf("%s changed once marshalled and parsed again", c.Name())
		}
	})
}
