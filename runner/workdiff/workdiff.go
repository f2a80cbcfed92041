// Package workdiff takes the diff of what a run changed in a git
// workspace: the commit the work tree stands on when the run starts
// (Base), and at its end the stat and the patch of the work tree against
// that commit, untracked files included (Take).
//
// Every git command runs through the executor, where the workspace lives
// (in a pod, the workspace container, which holds no secrets), never in
// the caller's process. Untracked files are added with intent-to-add to a
// scratch copy of the index in the executor's temporary directory, so the
// user's index is never changed.
package workdiff

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/aerie-run/aerie/runner/executor"
	"github.com/aerie-run/aerie/runner/transcript"
)

// DefaultCap bounds the patch a diff keeps, in bytes. A larger patch is
// cut at the cap; the record says so and gives the whole size.
const DefaultCap = 1 << 20

// statCap bounds the stat a diff keeps: one line per file changed.
const statCap = 64 << 10

// commandTimeout bounds each git command.
const commandTimeout = 2 * time.Minute

// Commands starts commands where the workspace is.
type Commands interface {
	Start(ctx context.Context, cmd executor.Command) (executor.Process, error)
}

// notWorkTree is the exit code of baseScript outside a git work tree or
// without git.
const notWorkTree = 3

// baseScript prints the commit HEAD is at, or the empty tree's id in a
// repository without commits.
const baseScript = `command -v git >/dev/null 2>&1 || exit 3
[ "$(git rev-parse --is-inside-work-tree 2>/dev/null)" = true ] || exit 3
git rev-parse --verify -q 'HEAD^{commit}' || git hash-object -t tree /dev/null
`

// diffScript prints the stat, a NUL byte and the patch of the work tree
// against the commit $0, with the untracked files that are not ignored
// added with intent-to-add to a scratch copy of the index.
const diffScript = `set -eu
export GIT_OPTIONAL_LOCKS=0 GIT_TERMINAL_PROMPT=0 GIT_PAGER=cat LC_ALL=C
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
index=$(git rev-parse --git-path index)
if [ -f "$index" ]; then cp "$index" "$tmp/index"; fi
export GIT_INDEX_FILE="$tmp/index"
git add --all --intent-to-add
git -c core.quotepath=off diff --no-color --no-ext-diff --no-textconv --stat=200 "$0"
printf '\000'
git -c core.quotepath=off diff --no-color --no-ext-diff --no-textconv --binary "$0"
`

// Base returns the commit the git work tree holding dir stands on. It is
// "" (and no error) when dir is in no work tree or git is not installed:
// such a workspace has no diff to take.
func Base(ctx context.Context, cmds Commands, dir string) (string, error) {
	out, code, err := run(ctx, cmds, dir, baseScript, nil, 4096)
	switch {
	case err != nil:
		return "", err
	case code == notWorkTree:
		return "", nil
	case code != 0:
		return "", fmt.Errorf("find the workspace's commit: git exited %d: %s", code, strings.TrimSpace(string(out)))
	}
	base := strings.TrimSpace(string(out))
	if base == "" {
		return "", errors.New("find the workspace's commit: git printed nothing")
	}
	return base, nil
}

// Take returns the diff of the work tree holding dir against base, the
// patch cut at limit bytes (DefaultCap when limit is not positive). A git
// command that fails is the record's Error, beside what was taken.
func Take(ctx context.Context, cmds Commands, dir, base string, limit int64) transcript.WorkspaceDiff {
	if limit <= 0 {
		limit = DefaultCap
	}
	d := transcript.WorkspaceDiff{Base: base, Cap: limit}
	var stat, patch capped
	stat.limit, patch.limit = statCap, limit
	sink := &split{stat: &stat, patch: &patch}
	code, err := stream(ctx, cmds, dir, diffScript, []string{base}, sink)
	// JSON holds UTF-8 only: a file in another encoding, or a rune cut
	// at the cap, would come back longer than it went in.
	d.Stat = strings.ToValidUTF8(string(stat.kept), "?")
	d.Patch = strings.ToValidUTF8(string(patch.kept), "?")
	d.Bytes, d.Truncated = patch.total, patch.total > int64(len(patch.kept))
	if !sink.past {
		d.Stat = "" // what came was git's complaint, not a stat
	}
	switch {
	case err != nil:
		d.Error = err.Error()
	case code != 0:
		d.Error = fmt.Sprintf("git diff exited %d: %s", code, strings.TrimSpace(string(sink.errs)))
	}
	return d
}

// run runs script in dir and returns at most limit bytes of its combined
// output and its exit code.
func run(ctx context.Context, cmds Commands, dir, script string, args []string, limit int64) ([]byte, int, error) {
	out := capped{limit: limit}
	code, err := stream(ctx, cmds, dir, script, args, &out)
	return out.kept, code, err
}

// stream runs script with args in dir, its combined output to w.
func stream(ctx context.Context, cmds Commands, dir, script string, args []string, w io.Writer) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, commandTimeout)
	defer cancel()
	argv := append([]string{"sh", "-c", script}, args...)
	p, err := cmds.Start(ctx, executor.Command{Argv: argv, Dir: dir, CombinedOutput: true})
	if err != nil {
		return 0, fmt.Errorf("start git: %w", err)
	}
	_, cerr := io.Copy(w, bufio.NewReaderSize(p.Stdout(), 64<<10))
	exit, err := p.Wait(ctx)
	if err != nil {
		return 0, fmt.Errorf("wait for git: %w", err)
	}
	if cerr != nil {
		return 0, fmt.Errorf("read git's output: %w", cerr)
	}
	return exit.Code, nil
}

// split sends what comes before the first NUL byte to stat and the rest
// to patch. With the combined output, git's complaints land in one of
// them; errs keeps the last of what came, for an error message.
type split struct {
	stat, patch *capped
	past        bool
	errs        []byte
}

func (s *split) Write(b []byte) (int, error) {
	n := len(b)
	if !s.past {
		i := strings.IndexByte(string(b), 0)
		if i < 0 {
			s.stat.write(b)
			s.note(b)
			return n, nil
		}
		s.stat.write(b[:i])
		s.note(b[:i])
		s.past, b = true, b[i+1:]
	}
	s.patch.write(b)
	s.note(b)
	return n, nil
}

// note keeps the last 4 KiB of the output for an error message.
func (s *split) note(b []byte) {
	const keep = 4096
	s.errs = append(s.errs, b...)
	if len(s.errs) > keep {
		s.errs = append(s.errs[:0], s.errs[len(s.errs)-keep:]...)
	}
}

// capped keeps the first limit bytes written to it and counts them all.
type capped struct {
	kept         []byte
	limit, total int64
}

func (c *capped) Write(b []byte) (int, error) {
	c.write(b)
	return len(b), nil
}

func (c *capped) write(b []byte) {
	c.total += int64(len(b))
	if room := c.limit - int64(len(c.kept)); room > 0 {
		c.kept = append(c.kept, b[:min(int64(len(b)), room)]...)
	}
}
