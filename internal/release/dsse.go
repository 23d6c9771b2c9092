package release

import (
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"strconv"

	"cacheon/internal/canon"
)

// PayloadType is the DSSE payload type of a signed release descriptor.
const PayloadType = "application/vnd.cacheon.release-descriptor+json"

// Envelope is a DSSE envelope (https://github.com/secure-systems-lab/dsse):
// a base64 payload, its type, and signatures over PAE(type, payload).
type Envelope struct {
	Payload     string      `json:"payload"`
	PayloadType string      `json:"payloadType"`
	Signatures  []Signature `json:"signatures"`
}

// Signature is one DSSE signature: the signing key's id and the base64
// signature.
type Signature struct {
	KeyID string `json:"keyid"`
	Sig   string `json:"sig"`
}

// PAE is the DSSE pre-authentication encoding:
// "DSSEv1" SP LEN(type) SP type SP LEN(body) SP body, lengths in ASCII
// decimal.
func PAE(payloadType string, body []byte) []byte {
	out := make([]byte, 0, len(payloadType)+len(body)+32)
	out = append(out, "DSSEv1 "...)
	out = strconv.AppendInt(out, int64(len(payloadType)), 10)
	out = append(out, ' ')
	out = append(out, payloadType...)
	out = append(out, ' ')
	out = strconv.AppendInt(out, int64(len(body)), 10)
	out = append(out, ' ')
	return append(out, body...)
}

// SignEnvelope signs payload of payloadType with priv.
func SignEnvelope(priv ed25519.PrivateKey, payloadType string, payload []byte) Envelope {
	pub := priv.Public().(ed25519.PublicKey)
	sig := ed25519.Sign(priv, PAE(payloadType, payload))
	return Envelope{
		Payload:     base64.StdEncoding.EncodeToString(payload),
		PayloadType: payloadType,
		Signatures:  []Signature{{KeyID: KeyID(pub), Sig: base64.StdEncoding.EncodeToString(sig)}},
	}
}

// Marshal returns the envelope's canonical JSON.
func (e Envelope) Marshal() ([]byte, error) {
	b, err := canon.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("dsse envelope: %w", err)
	}
	return b, nil
}

// ReadEnvelope is the strict reader of a DSSE envelope file: canonical
// JSON, no unknown, missing or duplicate field, valid base64 and at least
// one signature.
func ReadEnvelope(data []byte) (Envelope, error) {
	var e Envelope
	if err := canon.Decode(data, &e); err != nil {
		return Envelope{}, fmt.Errorf("dsse envelope: %w", err)
	}
	if _, err := base64.StdEncoding.Strict().DecodeString(e.Payload); err != nil {
		return Envelope{}, fmt.Errorf("dsse envelope: $.payload: %w", err)
	}
	if e.PayloadType == "" {
		return Envelope{}, fmt.Errorf("dsse envelope: $.payloadType: empty")
	}
	if len(e.Signatures) == 0 {
		return Envelope{}, fmt.Errorf("dsse envelope: $.signatures: no signature")
	}
	for i, s := range e.Signatures {
		if s.KeyID == "" {
			return Envelope{}, fmt.Errorf("dsse envelope: $.signatures[%d].keyid: empty", i)
		}
		if _, err := base64.StdEncoding.Strict().DecodeString(s.Sig); err != nil {
			return Envelope{}, fmt.Errorf("dsse envelope: $.signatures[%d].sig: %w", i, err)
		}
	}
	return e, nil
}

// Verify checks the envelope against pub: the payload type must be
// payloadType and a signature with pub's key id must verify over
// PAE(type, payload). It returns the payload.
func (e Envelope) Verify(pub ed25519.PublicKey, payloadType string) ([]byte, error) {
	if e.PayloadType != payloadType {
		return nil, fmt.Errorf("payloadType: %q is not %q", e.PayloadType, payloadType)
	}
	payload, err := base64.StdEncoding.Strict().DecodeString(e.Payload)
	if err != nil {
		return nil, fmt.Errorf("payload: %w", err)
	}
	id := KeyID(pub)
	found := false
	for i, s := range e.Signatures {
		if s.KeyID != id {
			continue
		}
		found = true
		sig, err := base64.StdEncoding.Strict().DecodeString(s.Sig)
		if err != nil {
			return nil, fmt.Errorf("signatures[%d].sig: %w", i, err)
		}
		if len(sig) == ed25519.SignatureSize && ed25519.Verify(pub, PAE(e.PayloadType, payload), sig) {
			return payload, nil
		}
		return nil, fmt.Errorf("signatures[%d].sig: the ed25519 signature by key %s does not verify", i, id)
	}
	if !found {
		return nil, fmt.Errorf("signatures: no signature by key %s", id)
	}
	return nil, fmt.Errorf("signatures: no valid signature")
}
