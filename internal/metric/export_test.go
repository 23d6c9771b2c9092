package metric

// UlpOf exposes ulpOf to the package's external tests.
var UlpOf = ulpOf
