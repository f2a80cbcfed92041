package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseDatabaseURL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    Database
		wantErr bool
	}{
		{in: "postgres://u:p@db:5432/aerie", want: Database{Backend: Postgres, URL: "postgres://u:p@db:5432/aerie"}},
		{in: "postgresql://db/aerie?sslmode=disable", want: Database{Backend: Postgres, URL: "postgresql://db/aerie?sslmode=disable"}},
		{in: "POSTGRES://db/aerie", want: Database{Backend: Postgres, URL: "POSTGRES://db/aerie"}},
		{in: "sqlite:///var/lib/aerie/s.db", want: Database{Backend: SQLite, Path: "/var/lib/aerie/s.db", URL: "sqlite:///var/lib/aerie/s.db"}},
		{in: "sqlite://rel/s.db", want: Database{Backend: SQLite, Path: "rel/s.db", URL: "sqlite://rel/s.db"}},
		{in: "sqlite:s.db", want: Database{Backend: SQLite, Path: "s.db", URL: "sqlite:s.db"}},
		{in: "sqlite:///dir with space/#odd%.db", want: Database{Backend: SQLite, Path: "/dir with space/#odd%.db", URL: "sqlite:///dir with space/#odd%.db"}},
		{in: "file:///abs/s.db", want: Database{Backend: SQLite, Path: "/abs/s.db", URL: "file:///abs/s.db"}},
		{in: "file:rel.db", want: Database{Backend: SQLite, Path: "rel.db", URL: "file:rel.db"}},
		{in: "sqlite:///x.db?_pragma=foo", wantErr: true},
		{in: "/abs/sessions.db", want: Database{Backend: SQLite, Path: "/abs/sessions.db", URL: "/abs/sessions.db"}},
		{in: "", wantErr: true},
		{in: "sqlite://", wantErr: true},
		{in: "relative.db", wantErr: true},
		{in: "host=db user=u password=p", wantErr: true},
		{in: "mysql://db/x", wantErr: true},
		{in: "postgres://u:p@db:bad port/x", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			got, err := ParseDatabaseURL(tt.in)
			if tt.wantErr {
				if !errors.Is(err, ErrDatabaseURL) {
					t.Fatalf("ParseDatabaseURL(%q) error = %v, want ErrDatabaseURL", tt.in, err)
				}
				if strings.Contains(err.Error(), ":p@") {
					t.Errorf("error leaks the password: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseDatabaseURL(%q): %v", tt.in, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParseDatabaseURL(%q) (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

func TestRedactDatabaseURL(t *testing.T) {
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
			if got := RedactDatabaseURL(tt.in); got != tt.want {
				t.Errorf("RedactDatabaseURL(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}
