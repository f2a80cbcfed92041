package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"

	"github.com/jackc/pgx/v5"
	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/aerie-run/aerie/runner/store"
)

// dbCheckFunc opens the database a database_url names and proves that it
// answers. It is the seam where runner/store/dburl's Open (which also
// migrates) can replace checkDatabase; setup only needs to know whether the
// connection works.
type dbCheckFunc func(ctx context.Context, databaseURL string) error

// checkDatabase is the dbCheckFunc in use: a plain connect and ping, opening
// the database the way the store will, so that what passes here also opens
// there.
func checkDatabase(ctx context.Context, databaseURL string) error {
	db, err := store.ParseURL(databaseURL)
	if err != nil {
		return err
	}
	switch db.Database {
	case store.Postgres:
		return checkPostgres(ctx, db.Raw)
	case store.SQLite:
		return checkSQLite(ctx, db.Path)
	default:
		return fmt.Errorf("unsupported database backend %q", db.Database)
	}
}

func checkPostgres(ctx context.Context, url string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err // pgx names host, user and database, never the password
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := conn.Ping(ctx); err != nil {
		return fmt.Errorf("ping: %w", err)
	}
	return nil
}

// checkSQLite opens the file as the store does at startup: it creates the
// parent directory (0700) and the file (0600), and switches the journal to
// WAL. Setting WAL writes to the file, so a read-only location fails here
// rather than at the first session. (store.ParseURL has refused a '?' in
// path, which the driver would cut off as options.)
func checkSQLite(ctx context.Context, path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("create database directory: %w", err)
	}
	// Created here rather than by SQLite so that it is private to the user
	// (SQLite gives its -wal and -shm files the same mode): transcripts hold
	// whatever the agent read.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("create sqlite database file: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("create sqlite database file: %w", err)
	}
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		return fmt.Errorf("open sqlite %s: %w", path, err)
	}
	defer db.Close()
	if err := db.PingContext(ctx); err != nil {
		return fmt.Errorf("open sqlite %s: %w", path, err)
	}
	var mode string // "wal", or the mode kept where WAL is impossible
	if err := db.QueryRowContext(ctx, "PRAGMA journal_mode=WAL").Scan(&mode); err != nil {
		return fmt.Errorf("set journal mode of sqlite %s: %w", path, err)
	}
	return nil
}
