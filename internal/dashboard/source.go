package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// ErrNotFound is what a Source returns (or wraps) for an id or a ref it
// does not hold; the dashboard answers 404.
var ErrNotFound = errors.New("dashboard: not found")

// Source is everything the dashboard reads. The validator node implements
// it over the store's query interface (and the evidence store); the
// dashboard knows nothing of the store, the referee or the chain. Every
// method only reads. Ids are reservation ids (64 lowercase hex digits) and
// refs are evidence refs ("domain:digest"); the dashboard checks their form
// before calling. A method returns ErrNotFound (or an error wrapping it)
// for an id or ref it does not hold.
type Source interface {
	// Overview is the validator at a glance. It is polled (Options.Poll)
	// for the live updates: any change of its fields is a change the
	// open pages show.
	Overview(ctx context.Context) (Overview, error)
	// Submissions lists every reservation in queue order (finalized
	// block, event index).
	Submissions(ctx context.Context) ([]Submission, error)
	// Submission is one reservation with its timeline and attempts.
	Submission(ctx context.Context, id string) (SubmissionDetail, error)
	// Attempt is one qualification attempt, by the ref of its sealed
	// attempt record.
	Attempt(ctx context.Context, ref string) (AttemptDetail, error)
	// Stacks lists the evaluation stack of every generation, newest
	// first.
	Stacks(ctx context.Context) ([]StackGeneration, error)
	// Journal is the settlement journal and whether it verifies.
	Journal(ctx context.Context) (JournalView, error)
	// Weights lists the weight publications, newest first.
	Weights(ctx context.Context) ([]WeightPublication, error)
	// Evidence is the sealed evidence object ref names, as stored
	// (canonical JSON); the dashboard serves it as it is.
	Evidence(ctx context.Context, ref string) ([]byte, error)
	// CrownRecords lists every settled crown, in journal order, as the
	// product crown record `cacheon integrate` takes (what `cacheon
	// validator crowns` prints): a maintainer, or the devnet demo, reads
	// them over HTTP from a running validator.
	CrownRecords(ctx context.Context) ([]CrownRecord, error)
}

// Overview is the validator at a glance.
type Overview struct {
	// Head is the finalized chain head block the validator has seen.
	Head uint64 `json:"head"`
	// Queue counts the reservations by state, in the order the page
	// shows them (the intake's order of states).
	Queue []StateCount `json:"queue"`
	// Transitions counts the queue's recorded transitions; every change
	// of a reservation adds one.
	Transitions uint64 `json:"transitions"`
	// Journal is the settlement journal's head and verification.
	Journal JournalHead `json:"journal"`
	// Stack is the current evaluation stack.
	Stack StackHead `json:"stack"`
	// Crowns counts the CROWN events of the journal.
	Crowns int `json:"crowns"`
	// Weights is the latest weight publication (nil: none yet).
	Weights *WeightPublication `json:"weights"`
	// Updated is the wall time of the latest change the source knows
	// of (not the time of the read). The live updates ignore it.
	Updated time.Time `json:"updated"`
}

// StateCount is the number of reservations in one queue state.
type StateCount struct {
	State string `json:"state"`
	Count int    `json:"count"`
}

// JournalHead is the settlement journal's head and whether the whole
// journal verifies (sequence, digests, links).
type JournalHead struct {
	Seq      uint64 `json:"seq"`
	Digest   string `json:"digest"`
	Verified bool   `json:"verified"`
	// Error is why it does not verify (empty when it does).
	Error string `json:"error"`
}

// StackHead names the current evaluation stack.
type StackHead struct {
	Generation uint64 `json:"generation"`
	Digest     string `json:"digest"`
}

// Submission is one reservation: a revealed proposal in the queue.
type Submission struct {
	ID          string `json:"id"`
	Block       uint64 `json:"block"`
	Index       uint32 `json:"index"`
	Hotkey      string `json:"hotkey"`
	ContentHash string `json:"content_hash"`
	URL         string `json:"url"`
	State       string `json:"state"`
	Reason      string `json:"reason"`
	// Attempts counts the qualification attempts decided (with a
	// verdict); Passes those that passed.
	Attempts int `json:"attempts"`
	Passes   int `json:"passes"`
	// UpdatedBlock is the finalized head at its latest transition.
	UpdatedBlock uint64 `json:"updated_block"`
	// Outcome is settlement's decision on a qualified reservation
	// ("crowned" or "held"; empty before settlement or for any other
	// state).
	Outcome string `json:"outcome"`
}

// SubmissionDetail is one reservation with its history.
type SubmissionDetail struct {
	Submission  Submission `json:"submission"`
	Fingerprint string     `json:"fingerprint"`
	// Timeline is everything that happened to it, oldest first: the
	// commit and the reveal on chain, the reservation, every queue
	// transition (fetch, scan, screen, leases) and every attempt.
	Timeline []TimelineEvent `json:"timeline"`
	// Attempts are its decided qualification attempts, oldest first.
	Attempts []AttemptSummary `json:"attempts"`
}

// TimelineEvent is one step of a reservation's history.
type TimelineEvent struct {
	// At is the wall time it was recorded (zero for chain events,
	// which have only a block).
	At    time.Time `json:"at"`
	Block uint64    `json:"block"`
	// Step names it: "commit", "reveal", "reservation", "fetch",
	// "scan", "screen", "lease", "attempt", "operator", ….
	Step string `json:"step"`
	// From and To are the queue states of a transition (empty for the
	// events that are none).
	From   string `json:"from"`
	To     string `json:"to"`
	Reason string `json:"reason"`
	// Ref is the evidence ref of an attempt (empty otherwise).
	Ref string `json:"ref"`
}

// AttemptSummary is one decided attempt as the submission page lists it.
type AttemptSummary struct {
	Ref     string    `json:"ref"`
	Number  int       `json:"number"`
	At      time.Time `json:"at"`
	Verdict string    `json:"verdict"`
	Reason  string    `json:"reason"`
	// Ratio is r as an exact decimal string (empty without reads).
	Ratio string `json:"ratio"`
}

// AttemptDetail is one qualification attempt: its reads, the speed rule's
// figures, the audit, the quality role and the verdict.
type AttemptDetail struct {
	Ref         string    `json:"ref"`
	Reservation string    `json:"reservation"`
	Number      int       `json:"number"`
	Target      string    `json:"target"`
	At          time.Time `json:"at"`
	// Reads are the timed reads, in the order B, C, B′ (roles "B", "C",
	// "B′"); a read not taken is absent.
	Reads []Read `json:"reads"`
	// Ratio (r = C / max(B, B′)), Drift (s = |B′−B| / mean(B, B′)) and
	// Bar (1 + max(m, k·s)) are exact decimal strings as sealed.
	Ratio string `json:"ratio"`
	Drift string `json:"drift"`
	Bar   string `json:"bar"`
	// Audit is role A's result; Quality role T's.
	Audit   Audit   `json:"audit"`
	Quality Quality `json:"quality"`
	// Verdict is PASS, FAIL or NO_DECISION; Reason its code; Detail the
	// sealed explanation.
	Verdict string `json:"verdict"`
	Reason  string `json:"reason"`
	Detail  string `json:"detail"`
	// Evidence names the sealed objects of the attempt (the plan, each
	// read, the audit, the scores), each linked.
	Evidence []EvidenceLink `json:"evidence"`
}

// Read is one timed read of a role.
type Read struct {
	// Role is "B", "C" or "B′".
	Role string `json:"role"`
	// Rate is the scored rate: the median of WaveRates, tokens/second.
	Rate float64 `json:"rate"`
	// WaveRates are the per-wave rates, tokens/second, in wave order.
	WaveRates []float64 `json:"wave_rates"`
	// Evidence is the ref of the sealed read.
	Evidence string `json:"evidence"`
}

// Audit is role A's result: the candidate's sampled calls regraded.
type Audit struct {
	Graded   int    `json:"graded"`
	Failures int    `json:"failures"`
	Summary  string `json:"summary"`
	Evidence string `json:"evidence"`
}

// Quality is role T's result: the quality rule's figures.
type Quality struct {
	Verdict  string       `json:"verdict"`
	Rows     []QualityRow `json:"rows"`
	Evidence string       `json:"evidence"`
}

// QualityRow is one figure of the quality rule against its limit.
type QualityRow struct {
	Prompt string `json:"prompt"`
	Metric string `json:"metric"`
	Value  string `json:"value"`
	Limit  string `json:"limit"`
	Pass   bool   `json:"pass"`
}

// EvidenceLink names one sealed evidence object.
type EvidenceLink struct {
	Name string `json:"name"`
	Ref  string `json:"ref"`
}

// StackGeneration is the evaluation stack of one generation.
type StackGeneration struct {
	Generation uint64       `json:"generation"`
	Digest     string       `json:"digest"`
	Entries    []StackEntry `json:"entries"`
	// Crown is the crown that made this generation (nil for genesis).
	Crown *Crown `json:"crown"`
}

// StackEntry is one target's holder in a stack.
type StackEntry struct {
	Target      string `json:"target"`
	Proposal    string `json:"proposal"`
	Contributor string `json:"contributor"`
	Reservation string `json:"reservation"`
	CrownDigest string `json:"crown_digest"`
}

// Crown is a CROWN event of the settlement journal.
type Crown struct {
	Seq         uint64 `json:"seq"`
	Digest      string `json:"digest"`
	Target      string `json:"target"`
	Proposal    string `json:"proposal"`
	Contributor string `json:"contributor"`
	Reservation string `json:"reservation"`
	// SpeedupPPM is the crown speedup in parts per million (1,070,000
	// is 1.07×).
	SpeedupPPM uint64 `json:"speedup_ppm"`
	// Block is the crowned block (the proposal's submission block).
	Block uint64 `json:"block"`
	// Evidence are the refs of both attempts.
	Evidence []string `json:"evidence"`
}

// JournalView is the settlement journal.
type JournalView struct {
	// Entries are the events, oldest first.
	Entries []JournalEntry `json:"entries"`
	// Verified: the journal verifies (sequence without gaps, each digest
	// the digest of its bytes, each prev the digest before); Error says
	// why not.
	Verified bool   `json:"verified"`
	Error    string `json:"error"`
}

// JournalEntry is one event of the settlement journal.
type JournalEntry struct {
	Seq         uint64 `json:"seq"`
	Digest      string `json:"digest"`
	Prev        string `json:"prev"`
	Kind        string `json:"kind"`
	Reservation string `json:"reservation"`
	Target      string `json:"target"`
	Summary     string `json:"summary"`
}

// WeightPublication is one published (or attempted) weight vector.
type WeightPublication struct {
	ID string `json:"id"`
	// Block is the projection block.
	Block uint64 `json:"block"`
	// State is intent, pending, confirmed or held; Reason says why held.
	State  string `json:"state"`
	Reason string `json:"reason"`
	// Burn: nothing carried credit and the burn target got everything.
	Burn bool `json:"burn"`
	// Vector is by uid; the ppm sum to 1,000,000.
	Vector []WeightEntry `json:"vector"`
}

// WeightEntry is one uid's share of a weight vector.
type WeightEntry struct {
	UID    uint16 `json:"uid"`
	Hotkey string `json:"hotkey"`
	PPM    uint32 `json:"ppm"`
}

// CrownRecord is one settled crown as a product crown record.
type CrownRecord struct {
	// Seq is the journal sequence number of its CROWN event.
	Seq         uint64 `json:"seq"`
	Reservation string `json:"reservation"`
	Target      string `json:"target"`
	Generation  uint64 `json:"generation"`
	// Speedup is the crown speedup as an exact decimal (the lower r of
	// the two attempts).
	Speedup     string `json:"speedup"`
	Contributor string `json:"contributor"`
	// Digest is the crown ref: the SHA-256 of the record's canonical
	// bytes.
	Digest string `json:"digest"`
	// Record is the crown record (a product object in its envelope). It
	// is served indented: a reader re-canonicalizes it (product.Decode-
	// Lenient) and checks the digest.
	Record json.RawMessage `json:"record"`
}
