package slot

import "math"

// Standard normals of generated values (step 3 of the generation rules in
// rng.go) come from a ziggurat of zigLayers layers of equal area zigArea
// under f(x) = exp(-x²/2), x ≥ 0, whose base layer ends in the tail
// beyond zigR (the constants of Marsaglia and Tsang's 128-layer
// ziggurat). Each draw takes one SplitMix64 output u: its low 7 bits pick
// the layer i, bit 7 the sign and its top 53 bits a uniform U in [0,1);
// x = U·w[i]. Inside the next layer's width (x < w[i+1]) x is taken;
// otherwise the base layer draws from the tail (Marsaglia's method: a =
// −ln(U1)/zigR, b = −ln(U2) until 2b > a², giving zigR + a) and another
// layer takes x when f(w[i]) + U′·(f(w[i+1]) − f(w[i])) < f(x), U′ a fresh
// uniform; a rejected draw starts again with a new output. It costs one
// output and no transcendental function in about 99 % of draws, where
// Box–Muller takes a logarithm, a square root, a sine and a cosine per
// pair.
const (
	zigLayers = 128
	zigR      = 3.442619855899
	zigArea   = 9.91256303526217e-3
)

// ziggurat holds the layer widths w[0..zigLayers] (w[0] the base layer's
// virtual width zigArea/f(zigR), w[1] = zigR, w[zigLayers] = 0) and
// f at each.
type ziggurat struct {
	w [zigLayers + 1]float64
	f [zigLayers + 1]float64
}

func gauss(x float64) float64 { return math.Exp(-0.5 * x * x) }

// newZiggurat computes the layers: w[i+1] = f⁻¹(f(w[i]) + zigArea/w[i]).
func newZiggurat() *ziggurat {
	z := &ziggurat{}
	z.w[0] = zigArea / gauss(zigR)
	z.w[1] = zigR
	for i := 1; i < zigLayers-1; i++ {
		z.w[i+1] = math.Sqrt(-2 * math.Log(gauss(z.w[i])+zigArea/z.w[i]))
	}
	z.w[zigLayers] = 0
	for i := range z.w {
		z.f[i] = gauss(z.w[i])
	}
	return z
}

// normal draws one standard normal from r's generator.
func (z *ziggurat) normal(r *rng) float64 {
	return z.from(r, r.src.Uint64())
}

// from is normal's draw whose first output, u, is already taken.
func (z *ziggurat) from(r *rng, u uint64) float64 {
	for {
		i := u & (zigLayers - 1)
		neg := u&zigLayers != 0
		x := float64(u>>11) / (1 << 53) * z.w[i]
		switch {
		case x < z.w[i+1]:
		case i == 0:
			x = z.tail(r)
		case z.f[i]+r.uniform()*(z.f[i+1]-z.f[i]) < gauss(x):
		default:
			u = r.src.Uint64()
			continue
		}
		if neg {
			return -x
		}
		return x
	}
}

// normals fills v with normal's draws, in order: the same values as a
// loop of normal, with the common case (x inside the next layer's width)
// taken in the loop itself.
func (z *ziggurat) normals(r *rng, v []float64) {
	src := r.src
	for k := range v {
		u := src.Uint64()
		i := u & (zigLayers - 1)
		x := float64(u>>11) / (1 << 53) * z.w[i]
		if x >= z.w[i+1] {
			v[k] = z.from(r, u)
			continue
		}
		if u&zigLayers != 0 {
			x = -x
		}
		v[k] = x
	}
}

// tail draws from the normal's tail beyond zigR.
func (z *ziggurat) tail(r *rng) float64 {
	for {
		a := -math.Log(1-r.uniform()) / zigR
		b := -math.Log(1 - r.uniform())
		if 2*b > a*a {
			return zigR + a
		}
	}
}
