package intake

// State is where a reservation stands (docs/market.md, "Intake").
type State string

// The states. Terminal: Failed, Expired, Qualified.
const (
	Arrival             State = "" // before the first state: the event's From
	Deferred            State = "deferred"
	Reserved            State = "reserved"
	Fetching            State = "fetching"
	TransportRetry      State = "transport_retry"
	Published           State = "published"
	Screening           State = "screening"
	Promoted            State = "promoted"
	Qualifying          State = "qualifying"
	ReproductionPending State = "reproduction_pending"
	NoDecision          State = "no_decision"
	Held                State = "held"
	Failed              State = "failed"
	Expired             State = "expired"
	Qualified           State = "qualified"
)

// Terminal reports whether no transition leaves s.
func (s State) Terminal() bool { return s == Failed || s == Expired || s == Qualified }

// Actor is who triggers a transition.
type Actor string

const (
	ByAdmission    Actor = "admission"    // Poll: one transaction per batch of finalized reveals
	ByBackpressure Actor = "backpressure" // Tick: deferred promoted FIFO as capacity frees
	BySLA          Actor = "sla"          // Tick: not finished within the SLA
	ByFetch        Actor = "fetch"        // Process: fetch and hash check
	ByScan         Actor = "scan"         // Process: static scan and copy check
	ByScreen       Actor = "screen"       // Process: screening on the arena's device
	ByLease        Actor = "lease"        // Lease, Complete, lease expiry
	ByResume       Actor = "resume"       // Resume after a restart
	ByOperator     Actor = "operator"     // Release of a held reservation
)

// Transition is one allowed edge of the state machine.
type Transition struct {
	From, To State
	By       Actor
	When     string
}

// Transitions is the state machine: every transition the intake makes is
// checked against it (allowed), and docs/market.md's table is tested to be
// exactly this one.
func Transitions() []Transition {
	return []Transition{
		{Arrival, Reserved, ByAdmission, "valid payload, under the hotkey's epoch cap, pending queue below its cap and nothing deferred"},
		{Arrival, Deferred, ByAdmission, "pending queue at its cap, or earlier arrivals still deferred (backpressure, not the miner's fault)"},
		{Arrival, Failed, ByAdmission, "invalid payload (invalid:) or over the hotkey's epoch cap (hotkey_cap:)"},
		{Deferred, Reserved, ByBackpressure, "capacity freed; oldest first"},
		{Deferred, Expired, BySLA, "SLA blocks passed since the reveal"},
		{Reserved, Fetching, ByFetch, "fetch attempt starts"},
		{Reserved, Failed, ByFetch, "copy_of: same content hash revealed earlier by another hotkey, or known_failure: the same bundle already failed in this arena"},
		{Reserved, Expired, BySLA, "SLA blocks passed since the reveal"},
		{Fetching, Published, ByFetch, "archive fetched, content hash checked, extracted"},
		{Fetching, TransportRetry, ByFetch, "transient fetch error with retry budget left"},
		{Fetching, TransportRetry, ByResume, "fetch interrupted by a restart, retry budget left"},
		{Fetching, Held, ByResume, "fetch interrupted by a restart, retry budget spent"},
		{Fetching, Failed, ByFetch, "permanent fetch error, or transient with the retry budget spent (fetch:)"},
		{Fetching, Expired, BySLA, "SLA blocks passed since the reveal"},
		{TransportRetry, Fetching, ByFetch, "next fetch attempt starts"},
		{TransportRetry, Held, ByFetch, "the retry budget is spent and the last step could not run (transient scan, fingerprint or screen)"},
		{TransportRetry, Expired, BySLA, "SLA blocks passed since the reveal"},
		{Published, Screening, ByScan, "scan passed, not a copy; fingerprint recorded"},
		{Published, Failed, ByScan, "scan rejected (scan:), or copy_of: same fingerprint revealed earlier by another hotkey"},
		{Published, TransportRetry, ByScan, "the fetched bundle is gone from the work directory, or the scan or fingerprint could not run (transient): fetch again, within the retry budget"},
		{Published, Expired, BySLA, "SLA blocks passed since the reveal"},
		{Screening, Promoted, ByScreen, "screen passed on the arena's device"},
		{Screening, Failed, ByScreen, "screen failed (screen:)"},
		{Screening, TransportRetry, ByScreen, "the fetched bundle is gone from the work directory, or the screen could not decide (transient): fetch again, within the retry budget"},
		{Screening, Expired, BySLA, "SLA blocks passed since the reveal"},
		{Promoted, Qualifying, ByLease, "a device group takes a qualification lease (new work)"},
		{ReproductionPending, Qualifying, ByLease, "a device group takes a lease for the reproduction (before new work)"},
		{NoDecision, Qualifying, ByLease, "a device group takes a lease to retry after NO_DECISION"},
		{Qualifying, Promoted, ByLease, "lease expired without a verdict (no attempt counted)"},
		{Qualifying, ReproductionPending, ByLease, "first PASS; or lease expired without a verdict after one PASS"},
		{Qualifying, NoDecision, ByLease, "NO_DECISION with retry budget left; or lease expired without a verdict after a NO_DECISION"},
		{Qualifying, Held, ByLease, "NO_DECISION with the retry budget spent"},
		{Qualifying, Failed, ByLease, "FAIL (qualify:)"},
		{Qualifying, Qualified, ByLease, "second independent PASS"},
		{Held, Reserved, ByOperator, "operator requeues (from the fetch, budgets reset)"},
		{Held, Failed, ByOperator, "operator fails it"},
	}
}

// allowed is the Transitions table as a set.
type allowed map[[2]State]bool

func newAllowed() allowed {
	a := allowed{}
	for _, t := range Transitions() {
		a[[2]State{t.From, t.To}] = true
	}
	return a
}
