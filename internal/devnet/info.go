package devnet

// What a client needs to use a running devnet from another process: `up`
// writes DIR/devnet.json once everything serves and removes it when it
// stops cleanly. A devnet that was killed leaves the file behind, so
// Attach believes it only after probing: the archive host answers
// /.well-known/cacheon-devnet with the instance token the file names (a
// random token each start, so another process that took the port over is
// not mistaken for it), the validator's API and the chain answer.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"cacheon/internal/market/localchain"
)

// InfoFile is the name of the file, in the devnet's directory, that says
// where a running devnet serves.
const InfoFile = "devnet.json"

// identityPath is where the archive host answers with the instance token.
const identityPath = "/.well-known/cacheon-devnet"

// ErrNotRunning says no devnet runs in a directory: it has no InfoFile, or
// the one it has names a devnet that no longer answers.
var ErrNotRunning = errors.New("no devnet is running there")

// Info is what a client needs to drive a running devnet over HTTP only.
type Info struct {
	// Dir is the devnet's directory (absolute).
	Dir string `json:"dir"`
	// Arena is the arena the validator referees.
	Arena string `json:"arena"`
	// Chain is the local chain's API base URL.
	Chain string `json:"chain"`
	// Archives is the archive host's base URL; it serves WWW.
	Archives string `json:"archives"`
	WWW      string `json:"www"`
	// Validator is the validator's HTTP address (host:port): the
	// dashboard, its JSON API under /api, /metrics and /healthz.
	Validator string `json:"validator"`
	// Instance is a random token of this start, served by the archive
	// host at /.well-known/cacheon-devnet.
	Instance string `json:"instance"`
	// PID is the process that serves it; Started when it started.
	PID     int       `json:"pid"`
	Started time.Time `json:"started"`
}

// Dashboard is the dashboard's URL.
func (i *Info) Dashboard() string { return "http://" + i.Validator + "/" }

// newInstance is a fresh instance token.
func newInstance() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("devnet: instance token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// writeInfo writes info to DIR/devnet.json atomically (a temporary file
// renamed over it), so a reader never sees half of it.
func writeInfo(info *Info) error {
	data, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return fmt.Errorf("devnet: %s: %w", InfoFile, err)
	}
	path := filepath.Join(info.Dir, InfoFile)
	tmp, err := os.CreateTemp(info.Dir, InfoFile+".tmp-*")
	if err != nil {
		return fmt.Errorf("devnet: write %s: %w", path, err)
	}
	_, err = tmp.Write(append(data, '\n'))
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("devnet: write %s: %w", path, err)
	}
	return nil
}

// removeInfo removes DIR/devnet.json if it is still this instance's (an
// up that failed must not remove the file of the devnet that runs).
func removeInfo(dir, instance string) {
	path := filepath.Join(dir, InfoFile)
	if info, err := readInfo(path); err == nil && info.Instance == instance {
		os.Remove(path)
	}
}

// readInfo reads and checks an InfoFile.
func readInfo(path string) (*Info, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var info Info
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&info); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%s: data after the object", path)
	}
	for _, f := range []struct{ name, v string }{{"dir", info.Dir}, {"arena", info.Arena}, {"chain", info.Chain},
		{"archives", info.Archives}, {"www", info.WWW}, {"validator", info.Validator}, {"instance", info.Instance}} {
		if f.v == "" {
			return nil, fmt.Errorf("%s: field %q is missing", path, f.name)
		}
	}
	if !strings.HasPrefix(info.Archives, "http://") {
		return nil, fmt.Errorf("%s: field \"archives\": %q is not an http:// URL", path, info.Archives)
	}
	return &info, nil
}

// Attach finds the devnet running in dir (started by `cacheon devnet up`
// or `demo --keep`, in this process or another) and checks that it
// answers. It returns an error wrapping ErrNotRunning when dir has no
// InfoFile (the error wraps fs.ErrNotExist too) or the one there is stale
// (its process stopped or was killed); any other error is a file that
// cannot be read.
func Attach(ctx context.Context, dir string) (*Info, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("devnet: %w", err)
	}
	path := filepath.Join(abs, InfoFile)
	info, err := readInfo(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("devnet: %w: %w", ErrNotRunning, err)
	}
	if err != nil {
		return nil, fmt.Errorf("devnet: %w (cacheon devnet up writes this file whole; if no devnet runs in %s, remove it)", err, abs)
	}
	if info.Dir != abs {
		return nil, fmt.Errorf("devnet: %s: field \"dir\" is %s: the directory was moved or copied; %w", path, info.Dir, ErrNotRunning)
	}
	if err := probe(ctx, info); err != nil {
		return nil, fmt.Errorf("devnet: %s is stale (%v): %w", path, err, ErrNotRunning)
	}
	return info, nil
}

// probe checks that the devnet info names answers: the archive host with
// its instance token, the validator's API and the chain.
func probe(ctx context.Context, info *Info) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	hc := &http.Client{Timeout: 5 * time.Second}
	token, err := getBody(ctx, hc, info.Archives+identityPath, 256)
	if err != nil {
		return fmt.Errorf("archive host: %w", err)
	}
	if strings.TrimSpace(string(token)) != info.Instance {
		return errors.New("the archive host's address now serves another devnet instance")
	}
	if _, err := getBody(ctx, hc, "http://"+info.Validator+"/api/overview", 1<<20); err != nil {
		return fmt.Errorf("validator: %w", err)
	}
	cl, err := localchain.NewClient(info.Chain, 5*time.Second)
	if err != nil {
		return fmt.Errorf("chain: %w", err)
	}
	if _, err := cl.Info(ctx); err != nil {
		return fmt.Errorf("chain: %w", err)
	}
	return nil
}

// getBody GETs url and returns its body (at most max bytes) if the answer
// is 200.
func getBody(ctx context.Context, hc *http.Client, url string, max int64) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	if int64(len(body)) > max {
		return nil, fmt.Errorf("GET %s: the answer exceeds %d bytes", url, max)
	}
	return body, nil
}
