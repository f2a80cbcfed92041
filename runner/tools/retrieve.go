package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// RetrieveName is the name of the retrieve tool.
const RetrieveName = "retrieve"

// Retrieve returns the original output of a call whose result was
// compressed or capped, as its Capper kept it. It is offered only when the
// Capper compresses (Capper.Compresses). An original longer than the
// Capper's limits comes in pages within them, each but the last ending
// with a line that says where the next one starts.
type Retrieve struct{ capper *Capper }

// NewRetrieve returns the retrieve tool of c's originals.
func NewRetrieve(c *Capper) *Retrieve { return &Retrieve{capper: c} }

func (*Retrieve) Name() string { return RetrieveName }

func (*Retrieve) Description() string {
	return "Return the original, byte-exact output of an earlier tool call whose result was compressed or " +
		"shortened: handle is the call id its result names in retrieve(handle=...). A long original comes in " +
		"pages; offset is the byte to start from (default 0), as the end of the previous page says."
}

func (*Retrieve) Schema() json.RawMessage {
	return schema(map[string]any{
		"handle": prop("string", "The handle the shortened result names: retrieve(handle=CALL_ID)."),
		"offset": prop("integer", "The byte offset to start from (default 0)."),
	}, "handle")
}

type retrieveArgs struct {
	Handle string `json:"handle"`
	Offset int    `json:"offset"`
}

// pageNote is room a page leaves under the byte limit for its last line.
const pageNote = 200

func (t *Retrieve) Run(ctx context.Context, call json.RawMessage) Result {
	var a retrieveArgs
	if r := decode(RetrieveName, call, &a); r != nil {
		return *r
	}
	if r := required(RetrieveName, "handle", a.Handle); r != nil {
		return *r
	}
	c := t.capper
	if c == nil || c.Originals == nil {
		return errorf("retrieve: no originals are kept in this session")
	}
	text, err := c.Originals.Original(ctx, a.Handle)
	if errors.Is(err, ErrNoOriginal) {
		return errorf("retrieve: no original output is kept for handle %q; use the call id a shortened result names",
			a.Handle)
	}
	if err != nil {
		return errorf("retrieve: %v", err)
	}
	if a.Offset < 0 || a.Offset > len(text) {
		return errorf("retrieve: offset %d is outside the original's %d bytes", a.Offset, len(text))
	}
	page := text[a.Offset:]
	end := len(page)
	if c.Max > 0 && end > c.Max {
		end = max(cutBack(page, max(c.Max-pageNote, c.Max/2)), 1)
	}
	if c.MaxLines > 0 && lineCount(page[:end]) > c.MaxLines {
		end = firstLinesEnd(page, max(c.MaxLines-1, 1))
	}
	if end == len(page) && a.Offset == 0 {
		return Result{Content: text}
	}
	next := a.Offset + end
	if next == len(text) {
		return Result{Content: page[:end] + fmt.Sprintf("\n[retrieve: bytes %d to %d of %d, the end]",
			a.Offset, next, len(text))}
	}
	return Result{Content: page[:end] + fmt.Sprintf(
		"\n[retrieve: bytes %d to %d of %d; the rest: retrieve(handle=%s, offset=%d)]",
		a.Offset, next, len(text), a.Handle, next)}
}
