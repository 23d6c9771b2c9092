package product

import (
	"fmt"

	"cacheon/internal/canon"
	"cacheon/internal/tensor"
)

// RuntimePin is the exact serving runtime a product or arena is built on.
type RuntimePin struct {
	// Name is the runtime ("sglang").
	Name string `json:"name"`
	// Version is the pinned revision, human readable.
	Version string `json:"version"`
	// Digest identifies the pinned runtime source exactly.
	Digest string `json:"digest"`
}

// Validate checks the pin.
func (r RuntimePin) Validate() error {
	if err := checkName("name", r.Name); err != nil {
		return err
	}
	if err := checkText("version", r.Version); err != nil {
		return err
	}
	return checkDigest("digest", r.Digest)
}

// ModelIdentity is the exact model: name, revision and the digest of its
// sealed weight tree.
type ModelIdentity struct {
	Name     string `json:"name"`
	Revision string `json:"revision"`
	Digest   string `json:"digest"`
}

// Validate checks the identity.
func (m ModelIdentity) Validate() error {
	if err := checkText("name", m.Name); err != nil {
		return err
	}
	if err := checkText("revision", m.Revision); err != nil {
		return err
	}
	return checkDigest("digest", m.Digest)
}

// Hardware is an arena's device class and topology.
type Hardware struct {
	// Accelerator names the device class ("nvidia-h200").
	Accelerator string `json:"accelerator"`
	// Devices is the number of devices one engine uses.
	Devices int `json:"devices"`
	// Topology describes how they are used ("tp2", "tp4-ep4").
	Topology string `json:"topology"`
}

// Validate checks the hardware description.
func (h Hardware) Validate() error {
	if err := checkName("accelerator", h.Accelerator); err != nil {
		return err
	}
	if h.Devices < 1 || h.Devices > 4096 {
		return fieldErr("devices", "%d is not in [1, 4096]", h.Devices)
	}
	return checkName("topology", h.Topology)
}

// Workload names the validator-owned serving workload by digest.
type Workload struct {
	Name   string `json:"name"`
	Digest string `json:"digest"`
}

// Validate checks the workload reference.
func (w Workload) Validate() error {
	if err := checkName("name", w.Name); err != nil {
		return err
	}
	return checkDigest("digest", w.Digest)
}

// ArenaPolicy is the registered speed policy of an arena (DESIGN.md §8):
// PASS iff C / max(B, B′) ≥ 1 + max(Margin, DriftFactor·s), NO_DECISION when
// the drift s exceeds NoiseCeiling, and a crown needs Attempts passing
// attempts.
type ArenaPolicy struct {
	SpeedPolicy  string        `json:"speed_policy"`
	Margin       canon.Decimal `json:"margin"`
	NoiseCeiling canon.Decimal `json:"noise_ceiling"`
	DriftFactor  canon.Decimal `json:"drift_factor"`
	Attempts     int           `json:"attempts"`
}

// Validate checks the policy parameters.
func (p ArenaPolicy) Validate() error {
	if err := checkName("speed_policy", p.SpeedPolicy); err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		d    canon.Decimal
	}{{"margin", p.Margin}, {"noise_ceiling", p.NoiseCeiling}, {"drift_factor", p.DriftFactor}} {
		if err := checkDecimal(f.name, f.d); err != nil {
			return err
		}
		if v, _ := f.d.Float64(); v < 0 {
			return fieldErr(f.name, "%s is negative", f.d)
		}
	}
	if p.Attempts < 2 {
		return fieldErr("attempts", "%d: a crown needs at least two independent passing attempts", p.Attempts)
	}
	return nil
}

// Arena is the frozen evaluation context that crowns are measured in, as
// an identity: runtime pin, model identity, dtype, hardware and topology,
// workload and policy parameters.
//
// It is not the engine settings the arena runtime is started with (the
// arena files arenas/NAME.toml, package arena); Settings links the two by
// digest, and CheckSettings checks the link where both meet.
type Arena struct {
	Name     string        `json:"name"`
	Runtime  RuntimePin    `json:"runtime"`
	Model    ModelIdentity `json:"model"`
	DType    string        `json:"dtype"`
	Hardware Hardware      `json:"hardware"`
	Workload Workload      `json:"workload"`
	Policy   ArenaPolicy   `json:"policy"`
	// Settings is the digest of the engine settings the arena is served
	// with: (*arena.Arena).Digest() of its arena file as selected for the
	// workload it is measured under (arena.Select), which identifies
	// exactly what the runtime runs. Being part of the identity, it makes
	// the arena digest cover those settings. It may be omitted (identities
	// written before it keep their digests), but CheckSettings then fails.
	Settings string `json:"settings,omitempty"`
}

// Domain implements Object.
func (*Arena) Domain() string { return DomainArena }

// Validate implements Object.
func (a *Arena) Validate() error {
	if err := checkName("name", a.Name); err != nil {
		return err
	}
	if err := within("runtime", a.Runtime.Validate()); err != nil {
		return err
	}
	if err := within("model", a.Model.Validate()); err != nil {
		return err
	}
	if _, err := tensor.ParseComputeDType(a.DType); err != nil {
		return fieldErr("dtype", "%v", err)
	}
	if err := within("hardware", a.Hardware.Validate()); err != nil {
		return err
	}
	if err := within("workload", a.Workload.Validate()); err != nil {
		return err
	}
	if err := within("policy", a.Policy.Validate()); err != nil {
		return err
	}
	if a.Settings == "" {
		return nil
	}
	return checkDigest("settings", a.Settings)
}

// CheckSettings checks that a is served with the engine settings whose
// digest is settings ((*arena.Arena).Digest() of the arena file as
// selected for the workload, package arena): the identity must name
// settings, and exactly those. Whoever starts an arena runtime for an
// arena identity calls it, so that a crown measured in a is measured with
// the settings a names.
func (a *Arena) CheckSettings(settings string) error {
	if err := canon.ValidDigest(settings); err != nil {
		return fmt.Errorf("arena %s: engine settings: %w", a.Name, err)
	}
	switch a.Settings {
	case settings:
		return nil
	case "":
		return fmt.Errorf("arena %s: %w", a.Name, fieldErr("settings", "missing: the arena identity names no engine settings, so none can be checked against it"))
	default:
		return fmt.Errorf("arena %s: %w", a.Name, fieldErr("settings", "%s is not the digest of the engine settings in use (%s)", a.Settings, settings))
	}
}
