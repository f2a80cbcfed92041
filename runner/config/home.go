package config

import (
	"os"
	"path/filepath"
)

// HomeEnv is the environment variable that overrides the home directory.
const HomeEnv = "AERIE_HOME"

// homeDirName is the home directory's name under the user's home, and under
// the working directory when the OS reports no user home.
const homeDirName = ".aerie"

// Env is what home resolution reads from the process. It is a value rather
// than direct calls to os so that tests, and commands that were handed their
// environment, resolve the home without touching the process.
type Env struct {
	// Getenv returns an environment variable, "" when unset. Nil is an empty
	// environment.
	Getenv func(key string) string
	// UserHomeDir returns the user's home directory, as os.UserHomeDir does.
	// Nil means the OS reports none.
	UserHomeDir func() (string, error)
}

// OSEnv returns the process's environment.
func OSEnv() Env {
	return Env{Getenv: os.Getenv, UserHomeDir: os.UserHomeDir}
}

// Home returns aerie's state directory, in the spec's order: a non-empty
// $AERIE_HOME (an empty value counts as unset, so `AERIE_HOME= aerie` cannot
// point the state at the working directory by accident); else ~/.aerie when
// the OS reports a home directory; else .aerie in the working directory,
// returned relative as the spec writes it (./.aerie).
func Home(env Env) string {
	if env.Getenv != nil {
		if h := env.Getenv(HomeEnv); h != "" {
			return h
		}
	}
	if env.UserHomeDir != nil {
		if dir, err := env.UserHomeDir(); err == nil && dir != "" {
			return filepath.Join(dir, homeDirName)
		}
	}
	return homeDirName
}

// FileName is the configuration file's name: in $AERIE_HOME, in a project
// layer directory and in a mounted layer.
const FileName = "config.toml"

// GlobalFile returns the global configuration file under home.
func GlobalFile(home string) string {
	return filepath.Join(home, FileName)
}
