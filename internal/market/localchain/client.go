package localchain

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"cacheon/internal/canon"
	"cacheon/internal/market/chain"
)

// maxResponseBody caps a response the client reads.
const maxResponseBody = 8 << 20

// Client talks to a node's HTTP API. It is a Backend; bind it to a key
// with NewWallet for a chain.Chain.
type Client struct {
	base string
	hc   *http.Client
}

// NewClient returns a client for the node at base (http://host:port).
// timeout bounds each request (0: 30s).
func NewClient(base string, timeout time.Duration) (*Client, error) {
	u, err := url.Parse(base)
	if err != nil {
		return nil, fmt.Errorf("chain URL %q: %w", clip(base), err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("chain URL %q: want http://HOST:PORT (or https://)", clip(base))
	}
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	return &Client{base: strings.TrimRight(base, "/"), hc: &http.Client{Timeout: timeout}}, nil
}

// URL is the node's base URL.
func (c *Client) URL() string { return c.base }

func (c *Client) get(ctx context.Context, path string, v any) error {
	return c.do(ctx, http.MethodGet, path, nil, v)
}

func (c *Client) do(ctx context.Context, method, path string, body []byte, v any) error {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return fmt.Errorf("chain %s %s: %w", method, path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("chain node %s: %w", c.base, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBody+1))
	if err != nil {
		return fmt.Errorf("chain node %s: read %s: %w", c.base, path, err)
	}
	if len(data) > maxResponseBody {
		return fmt.Errorf("chain node %s: %s: the answer exceeds %d bytes", c.base, path, maxResponseBody)
	}
	if resp.StatusCode/100 != 2 {
		return decodeError(resp.StatusCode, data)
	}
	if err := decodeBody(data, v); err != nil {
		return fmt.Errorf("chain node %s: %s: %w", c.base, path, err)
	}
	return nil
}

// decodeBody strictly decodes one JSON value: unknown fields, trailing
// data and a body that is not one value are refused.
func decodeBody(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("decode answer: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("decode answer: trailing data after the JSON value")
	}
	return nil
}

// decodeError turns a non-2xx answer into an error: a *RefusedError for
// a 4xx the node explained, a plain error (the node's fault) otherwise.
func decodeError(status int, data []byte) error {
	var e apiError
	if err := decodeBody(data, &e); err != nil || e.Error == "" {
		return fmt.Errorf("chain node: HTTP %d with no error message", status)
	}
	msg := e.Error
	if len(msg) > 2000 {
		msg = msg[:1997] + "..."
	}
	if status/100 == 4 && e.Code != "" && e.Code != "internal" {
		return refuse(e.Code, errors.New(msg))
	}
	return fmt.Errorf("chain node: HTTP %d: %s", status, msg)
}

// Info reports the node's chain.
func (c *Client) Info(ctx context.Context) (Info, error) {
	var v Info
	return v, c.get(ctx, "/v1/info", &v)
}

// Head returns the newest block.
func (c *Client) Head(ctx context.Context) (chain.Head, error) {
	var v chain.Head
	return v, c.get(ctx, "/v1/head", &v)
}

// Finalized returns the finalized head.
func (c *Client) Finalized(ctx context.Context) (chain.Head, error) {
	var v chain.Head
	return v, c.get(ctx, "/v1/finalized", &v)
}

// Reveals returns matched reveals (see chain.Chain), paging through the
// node's answers when limit <= 0 or exceeds a page.
func (c *Client) Reveals(ctx context.Context, after chain.Position, upTo uint64, limit int) ([]chain.Reveal, error) {
	out := []chain.Reveal{}
	for {
		page := MaxRevealsPage
		if limit > 0 && limit-len(out) < page {
			page = limit - len(out)
		}
		q := url.Values{}
		q.Set("after_block", strconv.FormatUint(after.Block, 10))
		q.Set("after_index", strconv.FormatUint(uint64(after.Index), 10))
		q.Set("up_to", strconv.FormatUint(upTo, 10))
		q.Set("limit", strconv.Itoa(page))
		var got []chain.Reveal
		if err := c.get(ctx, "/v1/reveals?"+q.Encode(), &got); err != nil {
			return nil, err
		}
		for i, r := range got {
			if !after.Less(r.Pos) || r.Pos.Block > upTo {
				return nil, fmt.Errorf("chain node %s: reveals: entry %d at %d/%d is out of the asked range or order", c.base, i, r.Pos.Block, r.Pos.Index)
			}
			after = r.Pos
		}
		out = append(out, got...)
		if len(got) < page || (limit > 0 && len(out) >= limit) {
			return out, nil
		}
	}
}

// Metagraph returns the finalized metagraph.
func (c *Client) Metagraph(ctx context.Context) ([]chain.Neuron, error) {
	var v []chain.Neuron
	return v, c.get(ctx, "/v1/metagraph", &v)
}

// Weights reads back hotkey's last finalized weight vector.
func (c *Client) Weights(ctx context.Context, hotkey string) (chain.WeightSet, error) {
	if err := checkHotkey(hotkey); err != nil {
		return chain.WeightSet{}, fmt.Errorf("weights: hotkey: %w", err)
	}
	var v chain.WeightSet
	return v, c.get(ctx, "/v1/weights/"+hotkey, &v)
}

// Account returns hotkey's account state.
func (c *Client) Account(ctx context.Context, hotkey string) (Account, error) {
	if err := checkHotkey(hotkey); err != nil {
		return Account{}, fmt.Errorf("account: hotkey: %w", err)
	}
	var v Account
	return v, c.get(ctx, "/v1/accounts/"+hotkey, &v)
}

// Commitment returns a commitment's state.
func (c *Client) Commitment(ctx context.Context, digest string) (Commitment, error) {
	if err := canon.ValidDigest(digest); err != nil {
		return Commitment{}, fmt.Errorf("commitment: %w", err)
	}
	var v Commitment
	return v, c.get(ctx, "/v1/commitments/"+digest, &v)
}

// Extrinsic returns where extrinsic id was included.
func (c *Client) Extrinsic(ctx context.Context, id string) (Receipt, error) {
	if err := canon.ValidDigest(id); err != nil {
		return Receipt{}, fmt.Errorf("extrinsic id: %w", err)
	}
	var v Receipt
	return v, c.get(ctx, "/v1/extrinsics/"+id, &v)
}

// Block returns block n.
func (c *Client) Block(ctx context.Context, n uint64) (Block, error) {
	var v Block
	return v, c.get(ctx, "/v1/blocks/"+strconv.FormatUint(n, 10), &v)
}

// Submit posts a signed extrinsic; the node's refusal comes back as a
// *RefusedError.
func (c *Client) Submit(ctx context.Context, x Extrinsic) (Receipt, error) {
	body, err := canon.Marshal(x)
	if err != nil {
		return Receipt{}, fmt.Errorf("submit: %w", err)
	}
	var v Receipt
	return v, c.do(ctx, http.MethodPost, "/v1/extrinsics", body, &v)
}

func posOf(q revealsQuery) chain.Position {
	return chain.Position{Block: q.AfterBlock, Index: q.AfterIndex}
}
