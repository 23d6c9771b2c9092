// Package pgtest provides a private PostgreSQL server for tests: a cluster
// initdb'd in a temporary directory, listening only on a unix socket in
// that directory, stopped and removed at cleanup. It is test support: only
// tests import it.
//
// When the PostgreSQL binaries are missing the test is skipped with a
// message naming scripts/ensure-postgres, unless the environment variable
// CI is set, in which case it fails (CI must have them). Run as root (CI
// containers), the server runs as the postgres system user through runuser,
// since postgres refuses to run as root.
package pgtest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// Server is a running private cluster.
type Server struct {
	dir    string // socket directory and parent of the data directory
	admin  string // DSN of the postgres database
	nextDB int
}

// binDir finds the directory holding initdb and pg_ctl: Debian's
// /usr/lib/postgresql/<newest>/bin, else the PATH.
func binDir() (string, bool) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool {
		vi, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[i])))
		vj, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[j])))
		return vi > vj
	})
	for _, d := range dirs {
		if exe(filepath.Join(d, "initdb")) && exe(filepath.Join(d, "pg_ctl")) {
			return d, true
		}
	}
	initdb, err1 := exec.LookPath("initdb")
	ctl, err2 := exec.LookPath("pg_ctl")
	if err1 == nil && err2 == nil && filepath.Dir(initdb) == filepath.Dir(ctl) {
		return filepath.Dir(initdb), true
	}
	return "", false
}

func exe(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}

// Start initdb's and starts a private cluster and stops it when the test
// ends.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, ok := binDir()
	if !ok {
		if os.Getenv("CI") != "" {
			t.Fatal("PostgreSQL binaries (initdb, pg_ctl) not found and CI is set: run scripts/ensure-postgres in CI")
		}
		t.Skip("PostgreSQL binaries (initdb, pg_ctl) not found: run scripts/ensure-postgres to install them")
	}
	// Not t.TempDir: its parents are 0700 root directories the postgres
	// user could not traverse.
	dir, err := os.MkdirTemp("", "cacheon-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	var prefix []string
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running as root needs the postgres system user to run the server: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
		prefix = []string{"runuser", "-u", "postgres", "--"}
	}
	run := func(name string, args ...string) {
		t.Helper()
		argv := append(append(append([]string{}, prefix...), filepath.Join(bin, name)), args...)
		cmd := exec.Command(argv[0], argv[1:]...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			log, _ := os.ReadFile(filepath.Join(dir, "log"))
			t.Fatalf("%s: %v\n%s\n%s", strings.Join(argv, " "), err, out.String(), log)
		}
	}
	data := filepath.Join(dir, "data")
	run("initdb", "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync", "--no-instructions")
	// No TCP: listen_addresses is empty and the socket lives in dir.
	opts := fmt.Sprintf("-k %s -c listen_addresses= -c fsync=off -c max_connections=50", dir)
	run("pg_ctl", "-D", data, "-l", filepath.Join(dir, "log"), "-o", opts, "-w", "-t", "60", "start")
	t.Cleanup(func() {
		argv := append(append(append([]string{}, prefix...), filepath.Join(bin, "pg_ctl")), "-D", data, "-m", "immediate", "-w", "stop")
		if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
			t.Logf("stop postgres: %v\n%s", err, out)
		}
	})
	return &Server{dir: dir, admin: dsn(dir, "postgres")}
}

func dsn(dir, db string) string {
	return "postgres://postgres@/" + db + "?host=" + dir + "&sslmode=disable"
}

// NewDatabase creates an empty database and returns its postgres:// DSN.
func (s *Server) NewDatabase(t testing.TB) string {
	t.Helper()
	s.nextDB++
	name := fmt.Sprintf("t%d", s.nextDB)
	cfg, err := pgx.ParseConfig(s.admin)
	if err != nil {
		t.Fatal(err)
	}
	db := stdlib.OpenDB(*cfg)
	defer db.Close()
	if _, err := db.ExecContext(context.Background(), "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	return dsn(s.dir, name)
}

// Exec runs one statement on the database named by dsn (test setup).
func Exec(t testing.TB, dsn, query string, args ...any) {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	db := stdlib.OpenDB(*cfg)
	defer db.Close()
	if _, err := db.ExecContext(context.Background(), query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}
