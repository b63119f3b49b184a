// Package archcheck holds the tests that keep docs/architecture.md and the
// README's Layout true to the code: every package is listed in both, and
// imports follow the rules the architecture page states.
package archcheck
