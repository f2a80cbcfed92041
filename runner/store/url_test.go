package store

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseURL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    URL
		wantErr bool
	}{
		{in: "postgres://u:p@db:5432/aerie", want: URL{Database: Postgres, Raw: "postgres://u:p@db:5432/aerie"}},
		{in: "postgresql://db/aerie?sslmode=disable", want: URL{Database: Postgres, Raw: "postgresql://db/aerie?sslmode=disable"}},
		{in: "POSTGRES://db/aerie", want: URL{Database: Postgres, Raw: "POSTGRES://db/aerie"}},
		{in: "sqlite:///var/lib/aerie/s.db", want: URL{Database: SQLite, Path: "/var/lib/aerie/s.db", Raw: "sqlite:///var/lib/aerie/s.db"}},
		{in: "sqlite://rel/s.db", want: URL{Database: SQLite, Path: "rel/s.db", Raw: "sqlite://rel/s.db"}},
		{in: "sqlite:s.db", want: URL{Database: SQLite, Path: "s.db", Raw: "sqlite:s.db"}},
		{in: "sqlite:///dir with space/#odd%.db", want: URL{Database: SQLite, Path: "/dir with space/#odd%.db", Raw: "sqlite:///dir with space/#odd%.db"}},
		{in: "file:///abs/s.db", want: URL{Database: SQLite, Path: "/abs/s.db", Raw: "file:///abs/s.db"}},
		{in: "file:rel.db", want: URL{Database: SQLite, Path: "rel.db", Raw: "file:rel.db"}},
		{in: "file:/home/me/s.db", want: URL{Database: SQLite, Path: "/home/me/s.db", Raw: "file:/home/me/s.db"}},
		{in: "sqlite:/home/me/.aerie/s.db", want: URL{Database: SQLite, Path: "/home/me/.aerie/s.db", Raw: "sqlite:/home/me/.aerie/s.db"}},
		{in: "sqlite:relative/s.db", want: URL{Database: SQLite, Path: "relative/s.db", Raw: "sqlite:relative/s.db"}},
		{in: "/path with spaces/#1/s.db", want: URL{Database: SQLite, Path: "/path with spaces/#1/s.db", Raw: "/path with spaces/#1/s.db"}},
		{in: "sqlite:///x.db?_pragma=foo", wantErr: true},
		{in: "/abs/sessions.db", want: URL{Database: SQLite, Path: "/abs/sessions.db", Raw: "/abs/sessions.db"}},
		{in: "", wantErr: true},
		{in: "sqlite://", wantErr: true},
		{in: "sqlite:", wantErr: true},
		{in: "file:", wantErr: true},
		{in: "sqlite:/x.db\x00", wantErr: true},
		{in: "relative.db", wantErr: true},
		{in: "host=db user=u password=p", wantErr: true},
		{in: "mysql://db/x", wantErr: true},
		{in: "postgres://u:p@db:bad port/x", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			got, err := ParseURL(tt.in)
			if tt.wantErr {
				if !errors.Is(err, ErrURL) {
					t.Fatalf("ParseURL(%q) error = %v, want ErrURL", tt.in, err)
				}
				if strings.Contains(err.Error(), ":p@") {
					t.Errorf("error leaks the password: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseURL(%q): %v", tt.in, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParseURL(%q) (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

func TestRedactURL(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"postgres://u:s3cret@db:5432/aerie", "postgres://u:xxxxx@db:5432/aerie"},
		{"postgres://u@db/aerie", "postgres://u@db/aerie"},
		{"postgres://db/aerie?user=u&password=s3cret", "postgres://db/aerie?password=xxxxx&user=u"},
		{"postgres://u:p%40ss@db/aerie", "postgres://u:xxxxx@db/aerie"},
		{"postgres://u:s3cret@db:bad port/x", "postgres://u:xxxxx@db:bad port/x"},
		{"host=db user=u password=s3cret dbname=x", "host=db user=u password=xxxxx dbname=x"},
		{"host=db password='s3 cret' dbname=x", "host=db password=xxxxx dbname=x"},
		{"sqlite:///home/u/.aerie/sessions.db", "sqlite:///home/u/.aerie/sessions.db"},
		{"sqlite:///tmp/password=x.db", "sqlite:///tmp/password=x.db"},
		{"/abs/s.db", "/abs/s.db"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			if got := RedactURL(tt.in); got != tt.want {
				t.Errorf("RedactURL(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}
