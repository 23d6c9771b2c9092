package referee

import (
	"fmt"
	"strconv"

	"cacheon/internal/canon"
	"cacheon/internal/evidence"
)

// Evidence domains of the referee.
const (
	DomainPlan        = "cacheon.referee.plan"
	DomainRead        = "cacheon.referee.read"
	DomainTrajectory  = "cacheon.referee.trajectories"
	DomainAudit       = "cacheon.referee.audit"
	DomainAttempt     = "cacheon.referee.attempt"
	DomainCalibration = "cacheon.referee.calibration"
	DomainCrown       = "cacheon.referee.crown_candidate"
)

// Plan is what an attempt was going to do, sealed before its first read.
type Plan struct {
	Arena     string `json:"arena"`     // arena digest (settings, workload selected)
	Incumbent string `json:"incumbent"` // digest of the incumbent stack (slot → content hash)
	// Stock says the incumbent is the stock stack: only its reads have a
	// calibrated rate to be sane against.
	Stock  bool   `json:"stock"`
	Target string `json:"target"` // the registered target (for a singleton, the slot the candidate replaces)
	// Members are the slots an atomic target replaces at once (absent for
	// a singleton: its slot is Target).
	Members     []string `json:"members,omitempty"`
	Candidate   string   `json:"candidate"`       // candidate bundle content hash
	Calibration string   `json:"calibration"`     // digest of the calibration record
	Attempt     int      `json:"attempt"`         // 1 or 2
	Order       string   `json:"order"`           // engine placement of this attempt
	Commit      string   `json:"commit"`          // SHA-256 of the attempt's secret, revealed after the reads
	Waves       int      `json:"waves"`           // timed waves per read
	Warmup      int      `json:"warmup"`          // warm-up waves per read
	Nudge       bool     `json:"nudge,omitempty"` // a context of the referee's own came and went beside each timed engine before its reads
	TPrompts    int      `json:"t_prompts"`       // prompts T scores
	AuditShare  string   `json:"audit_share"`     // share of the candidate's calls in A's timed waves A dumps
	AuditMaxDmp int      `json:"audit_max"`       // most calls A dumps, all slots together
	Device      string   `json:"device"`          // device kind of the arena
	Schedule    string   `json:"schedule"`        // the role order, e.g. "B C B′ A T"
	Workload    string   `json:"workload"`        // workload name
	Scheme      string   `json:"scheme"`          // version of this procedure
	MinAudited  int      `json:"min_audited"`     // least dumps of the target A must grade
	TailNLL     string   `json:"tail_nll"`        // tail threshold of the quality rule
	QualityRule string   `json:"quality_rule"`    // digest of the quality constants in use
}

// slots are the slots the plan's candidate replaces.
func (p Plan) slots() []string {
	if len(p.Members) > 0 {
		return p.Members
	}
	return []string{p.Target}
}

// ReadRecord is one sealed read: per-wave host measurements, the tokens'
// digest and the counters of the timed waves.
type ReadRecord struct {
	Role         string       `json:"role"` // B, C or B′
	Waves        []Wave       `json:"waves"`
	TokensDigest string       `json:"tokens_digest"`
	Fired        int64        `json:"fired"`    // calls of the target in the timed waves
	Selected     int64        `json:"selected"` // of them, served by the candidate
	Trajectories evidence.Ref `json:"trajectories"`
}

// TrajectorySet is one read's sealed trajectories: for every request of
// every timed wave, its prompt, generated tokens and the engine's own
// log-probabilities (exact decimal strings of float64).
type TrajectorySet struct {
	Requests []SealedRequest `json:"requests"`
}

// SealedRequest is one request's trajectory.
type SealedRequest struct {
	Wave     int      `json:"wave"`
	RID      string   `json:"rid"`
	Prompt   []int    `json:"prompt"`
	Tokens   []int    `json:"tokens"`
	Logprobs []string `json:"logprobs"`
}

// AuditRecord is A's sealed outcome: each dump's grade.
type AuditRecord struct {
	Dumps []AuditDump `json:"dumps"`
	// Positions are the selected calls of each slot A was told to dump,
	// drawn from the attempt's secret over A's timed waves (auditPositions);
	// each must be among the dumps.
	Positions map[string][]int `json:"positions,omitempty"`
	// Selected is how often A's timed waves selected the candidate, per
	// slot (C's timed waves, the same workload, drew the positions).
	Selected map[string]int64 `json:"selected,omitempty"`
	// Graphs says A ran CUDA graphs as C did, its replayed calls dumped
	// through copies captured beside them (absent: eager).
	Graphs bool `json:"graphs,omitempty"`
}

// AuditDump is one regraded dump.
type AuditDump struct {
	Slot    string `json:"slot"`
	Call    int    `json:"call"`
	Outcome string `json:"outcome"`
	Reason  string `json:"reason,omitempty"`
}

// ScoreRecord is what T returned for one selected prompt and role: the
// teacher NLL of each generated token, as exact decimal strings.
type ScoreRecord struct {
	Role   string   `json:"role"`
	RID    string   `json:"rid"`
	Wave   int      `json:"wave"`
	NLL    []string `json:"nll"`
	Digest string   `json:"tokens_digest"`
}

// AttemptRecord is an attempt's sealed result; every number of its verdict
// is re-derived from the evidence it names (Check).
type AttemptRecord struct {
	Plan    evidence.Ref   `json:"plan"`
	Secret  string         `json:"secret"` // revealed after the reads; its SHA-256 is the plan's commit
	Reads   []evidence.Ref `json:"reads"`  // B, C, B′ (those that were read)
	Audit   *evidence.Ref  `json:"audit,omitempty"`
	Scores  []ScoreRecord  `json:"scores,omitempty"`
	Speed   *SpeedSummary  `json:"speed,omitempty"`
	Verdict Verdict        `json:"verdict"`
}

// SpeedSummary is the speed rule's figures as sealed.
type SpeedSummary struct {
	B      canon.Decimal `json:"b"`
	C      canon.Decimal `json:"c"`
	BPrime canon.Decimal `json:"b_prime"`
	Drift  canon.Decimal `json:"drift"`
	Ratio  canon.Decimal `json:"ratio"`
	Bar    canon.Decimal `json:"bar"`
}

func summary(s SpeedResult) *SpeedSummary {
	return &SpeedSummary{B: s.B, C: s.C, BPrime: s.BPrime, Drift: s.Drift, Ratio: s.Ratio, Bar: s.Bar}
}

// floats and parseFloats carry float64 values through canonical JSON as
// exact decimal strings ('g', shortest round-trip form).
func floats(v []float64) []string {
	out := make([]string, len(v))
	for i, x := range v {
		out[i] = strconv.FormatFloat(x, 'g', -1, 64)
	}
	return out
}

func parseFloats(v []string) ([]float64, error) {
	out := make([]float64, len(v))
	for i, s := range v {
		x, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("value %d: %w", i, err)
		}
		out[i] = x
	}
	return out, nil
}
