package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/aerie-run/aerie/runner/executor/mtls"
)

// credentialMode is the mode of a credential file: it holds a private key.
const credentialMode fs.FileMode = 0o600

func newExecutorCredentialsCmd() *cobra.Command {
	var (
		out      string
		validity time.Duration
	)
	cmd := &cobra.Command{
		Use:   "credentials --out DIR NAME...",
		Short: "Generate the credentials of a runner and its executors, for serve --listen",
		Long: `Credentials generates one set of credentials for a runner and the executors
NAME... (DNS labels): DIR/runner.pem for the runner, and DIR/NAME.pem for each
executor, to serve with "aerie executor serve --listen ADDR --credential
DIR/NAME.pem". Each file is PEM: the side's certificate, its private key
(PKCS #8) and the certificate of the set's authority; mode 0600. Give each
side its own file only.

The set has an authority of its own, whose key is discarded once the files
are signed: no certificate can be added to the set, and no other set's
certificate is accepted. The runner's certificate authenticates it to every
executor of the set; executor NAME's certificate is valid for
NAME.executor.aerie only, so that one executor cannot pose as another.

Existing files are never overwritten: remove them, or choose another --out.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return errors.New("name the executors, one or more DNS labels: aerie executor credentials --out DIR NAME [NAME]")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, names []string) error {
			if out == "" {
				return errors.New("--out DIR is required: the directory to write runner.pem and NAME.pem in")
			}
			return writeCredentials(cmd, out, names, validity)
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "write the files in the directory `DIR` (created if missing, mode 0700)")
	cmd.Flags().DurationVar(&validity, "validity", 30*24*time.Hour, "how long the certificates are valid")
	return cmd
}

// writeCredentials generates a set for names and writes it in dir,
// refusing before writing anything if a file is there already.
func writeCredentials(cmd *cobra.Command, dir string, names []string, validity time.Duration) error {
	runner, execs, err := mtls.NewSet(names, validity)
	if err != nil {
		return err
	}
	execs[mtls.RunnerName] = runner
	names = append([]string{mtls.RunnerName}, names...)
	var existing []string
	for _, name := range names {
		file := filepath.Join(dir, name+".pem")
		if _, err := os.Lstat(file); err == nil {
			existing = append(existing, file)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("check %s: %w", file, err)
		}
	}
	if len(existing) > 0 {
		return fmt.Errorf("%s exist already: remove them, or choose another --out", strings.Join(existing, ", "))
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	for _, name := range names {
		file := filepath.Join(dir, name+".pem")
		if err := writeExclusive(file, execs[name].Marshal()); err != nil {
			return err
		}
		if _, err := fmt.Fprintln(cmd.OutOrStdout(), file); err != nil {
			return err
		}
	}
	return nil
}

// writeExclusive creates file with data and credentialMode; it fails if
// file exists.
func writeExclusive(file string, data []byte) error {
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_EXCL, credentialMode)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s exists already: remove it, or choose another --out", file)
	}
	if err != nil {
		return fmt.Errorf("write credential: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return fmt.Errorf("write credential %s: %w", file, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write credential %s: %w", file, err)
	}
	return nil
}
