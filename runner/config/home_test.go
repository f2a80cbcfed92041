package config

import (
	"errors"
	"path/filepath"
	"testing"
)

func TestHome(t *testing.T) {
	t.Parallel()
	env := func(vars map[string]string) func(string) string {
		return func(k string) string { return vars[k] }
	}
	userHome := func(dir string, err error) func() (string, error) {
		return func() (string, error) { return dir, err }
	}
	tests := []struct {
		name string
		env  Env
		want string
	}{
		{
			name: "AERIE_HOME wins over the user home",
			env:  Env{Getenv: env(map[string]string{"AERIE_HOME": "/srv/aerie"}), UserHomeDir: userHome("/home/u", nil)},
			want: "/srv/aerie",
		},
		{
			name: "relative AERIE_HOME is kept as given",
			env:  Env{Getenv: env(map[string]string{"AERIE_HOME": "state"}), UserHomeDir: userHome("/home/u", nil)},
			want: "state",
		},
		{
			name: "empty AERIE_HOME counts as unset",
			env:  Env{Getenv: env(map[string]string{"AERIE_HOME": ""}), UserHomeDir: userHome("/home/u", nil)},
			want: filepath.Join("/home/u", ".aerie"),
		},
		{
			name: "unset AERIE_HOME uses the user home",
			env:  Env{Getenv: env(nil), UserHomeDir: userHome("/home/u", nil)},
			want: filepath.Join("/home/u", ".aerie"),
		},
		{
			name: "no user home falls back to the working directory",
			env:  Env{Getenv: env(nil), UserHomeDir: userHome("", errors.New("$HOME is not defined"))},
			want: ".aerie",
		},
		{
			name: "an empty user home counts as none",
			env:  Env{Getenv: env(nil), UserHomeDir: userHome("", nil)},
			want: ".aerie",
		},
		{
			name: "zero Env is an empty environment without a user home",
			want: ".aerie",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := Home(tt.env); got != tt.want {
				t.Errorf("Home() = %q, want %q", got, tt.want)
			}
		})
	}
}
