package hints

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"

	"github.com/ironic-go/ironic-agent/internal/pyconv"
)

// This file is a Go rendering of oslo.utils' specs_matcher, the little
// comparison language root-device hints are written in ("s== foo",
// ">= 100", "<or> a <or> b", ...). IPA leans on its exact quirks (a
// parse that stops at the first token, Python's typed comparisons), so
// they are reproduced deliberately; the comments say where.

// specValue is a Python value as the matcher sees it: IPA compares device
// sizes as floats and every other attribute as a string.
type specValue struct {
	isNum bool
	num   float64
	str   string
}

func (v specValue) String() string {
	if v.isNum {
		return strconv.FormatFloat(v.num, 'g', -1, 64)
	}
	return v.str
}

// The operator keywords, in the order pyparsing tries them: "==" before
// "=", "s<=" before "s<" and so on, so the longest operator wins.
var unaryOps = []string{"==", "=", "!=", "<in>", ">=", "<=", ">", "<", "s==", "s!=", "s<=", "s<", "s>=", "s>"}

const (
	opAllIn   = "<all-in>"
	opOr      = "<or>"
	opRangeIn = "<range-in>"
)

// isSpecSpace is pyparsing's default whitespace set.
func isSpecSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

type specParser struct {
	s   string
	pos int
}

func (p *specParser) skip() {
	for p.pos < len(p.s) && isSpecSpace(p.s[p.pos]) {
		p.pos++
	}
}

// literal consumes lit (after whitespace) if it is next.
func (p *specParser) literal(lit string) bool {
	save := p.pos
	p.skip()
	if strings.HasPrefix(p.s[p.pos:], lit) {
		p.pos += len(lit)
		return true
	}
	p.pos = save
	return false
}

func (p *specParser) unaryOp() (string, bool) {
	for _, op := range unaryOps {
		if p.literal(op) {
			return op, true
		}
	}
	return "", false
}

// atom is a run of non-space characters that does not start with an
// operator keyword.
func (p *specParser) atom() (string, bool) {
	save := p.pos
	p.skip()
	rest := p.s[p.pos:]
	for _, kw := range append([]string{opAllIn, opOr, opRangeIn}, unaryOps...) {
		if strings.HasPrefix(rest, kw) {
			p.pos = save
			return "", false
		}
	}
	end := strings.IndexFunc(rest, unicode.IsSpace)
	if end < 0 {
		end = len(rest)
	}
	if end == 0 {
		p.pos = save
		return "", false
	}
	p.pos += end
	return rest[:end], true
}

// parseSpec tokenises spec like specs_matcher's grammar: the first
// alternative of disjunction | all-in | range-in | unary | atom that
// matches a prefix wins, and the rest of the string is ignored, as
// pyparsing's parseString does. ok is false when nothing matches (a
// ParseException in Python).
func parseSpec(spec string) (tree []string, ok bool) {
	for _, alt := range []func(*specParser) []string{
		(*specParser).disjunction,
		(*specParser).allIn,
		(*specParser).rangeIn,
		(*specParser).unary,
		(*specParser).single,
	} {
		// Each alternative starts at the beginning, as pyparsing
		// backtracks to it after a failed alternative.
		if t := alt(&specParser{s: spec}); t != nil {
			return t, true
		}
	}
	return nil, false
}

// disjunction is "<or> a <or> b ...": the "<or>" tokens are dropped but
// the first, and a trailing "<or>" without an atom is left unparsed.
func (p *specParser) disjunction() []string {
	out := []string{opOr}
	for {
		save := p.pos
		if !p.literal(opOr) {
			break
		}
		a, ok := p.atom()
		if !ok {
			p.pos = save
			break
		}
		out = append(out, a)
	}
	if len(out) == 1 {
		return nil
	}
	return out
}

// allIn is "<all-in> a b ..." with at least one atom.
func (p *specParser) allIn() []string {
	if !p.literal(opAllIn) {
		return nil
	}
	out := []string{opAllIn}
	for {
		a, ok := p.atom()
		if !ok {
			break
		}
		out = append(out, a)
	}
	if len(out) == 1 {
		return nil
	}
	return out
}

// rangeIn is "<range-in> [ a b ]": exactly four atoms, the brackets
// included, which specMatch checks.
func (p *specParser) rangeIn() []string {
	if !p.literal(opRangeIn) {
		return nil
	}
	out := []string{opRangeIn}
	for range 4 {
		a, ok := p.atom()
		if !ok {
			return nil
		}
		out = append(out, a)
	}
	return out
}

// unary is an operator and one atom ("s== foo", ">= 10").
func (p *specParser) unary() []string {
	op, ok := p.unaryOp()
	if !ok {
		return nil
	}
	a, ok := p.atom()
	if !ok {
		return nil
	}
	return []string{op, a}
}

// single is one bare atom.
func (p *specParser) single() []string {
	a, ok := p.atom()
	if !ok {
		return nil
	}
	return []string{a}
}

// errSpecType marks a comparison Python would refuse with a TypeError or
// ValueError (a float against a string operator, a non-number against a
// numeric one).
var errSpecType = errors.New("cannot compare")

// specMatch reports whether value satisfies spec (specs_matcher.match).
func specMatch(value specValue, spec string) (bool, error) {
	tree, ok := parseSpec(spec)
	if !ok {
		tree = []string{spec}
	}
	if len(tree) == 1 {
		return !value.isNum && value.str == tree[0], nil
	}
	op, args := tree[0], tree[1:]
	num := func() (float64, float64, error) {
		x, err := pyFloatOf(value)
		if err != nil {
			return 0, 0, err
		}
		y, err := pyFloat(args[0])
		if err != nil {
			return 0, 0, err
		}
		return x, y, nil
	}
	switch op {
	case "=", ">=", "==", "!=", "<=", "<", ">":
		x, y, err := num()
		if err != nil {
			return false, fmt.Errorf("%q: %w", spec, err)
		}
		switch op {
		case "=", ">=":
			return x >= y, nil
		case "==":
			return x == y, nil
		case "!=":
			return x != y, nil
		case "<=":
			return x <= y, nil
		case "<":
			return x < y, nil
		default:
			return x > y, nil
		}
	case "s==", "s!=":
		eq := !value.isNum && value.str == args[0]
		return eq == (op == "s=="), nil
	case "s<", "s<=", "s>", "s>=":
		if value.isNum {
			return false, fmt.Errorf("%q: %w a number with a string operator", spec, errSpecType)
		}
		// Go compares UTF-8 bytes, which orders like Python's code points.
		c := strings.Compare(value.str, args[0])
		switch op {
		case "s<":
			return c < 0, nil
		case "s<=":
			return c <= 0, nil
		case "s>":
			return c > 0, nil
		default:
			return c >= 0, nil
		}
	case "<in>":
		if value.isNum {
			return false, fmt.Errorf("%q: %w: <in> needs a string, the value is a number", spec, errSpecType)
		}
		return strings.Contains(value.str, args[0]), nil
	case opOr:
		if value.isNum {
			return false, nil // Python: a float never equals a string
		}
		for _, a := range args {
			if value.str == a {
				return true, nil
			}
		}
		return false, nil
	case opAllIn:
		// specs_matcher evaluates the value as a Python list literal; a
		// root-device attribute is a URL-quoted string or a float, never
		// a list, so Python always raises here.
		return false, fmt.Errorf("%q: %w: <all-in> needs a list value, got %q", spec, errSpecType, value.String())
	case opRangeIn:
		return rangeIn(spec, value, args)
	}
	return false, fmt.Errorf("%q: unknown operator %q", spec, op)
}

func rangeIn(spec string, value specValue, y []string) (bool, error) {
	if value.isNum {
		// ast.literal_eval of a float is "malformed node".
		return false, fmt.Errorf("%q: %w: <range-in> needs a literal, the value is a number", spec, errSpecType)
	}
	x, err := pyLiteralNumber(value.str)
	if err != nil {
		return false, fmt.Errorf("%q: %w", spec, err)
	}
	lo, err := pyFloat(y[1])
	if err != nil {
		return false, fmt.Errorf("%q: %w", spec, err)
	}
	hi, err := pyFloat(y[2])
	if err != nil {
		return false, fmt.Errorf("%q: %w", spec, err)
	}
	if lo > hi {
		return false, fmt.Errorf("%q: <range-in> lower bound %v is above upper bound %v", spec, lo, hi)
	}
	var lower, upper bool
	switch y[0] {
	case "[":
		lower = x >= lo
	case "(":
		lower = x > lo
	default:
		return false, fmt.Errorf("%q: <range-in> must start with ( or [", spec)
	}
	switch y[3] {
	case "]":
		upper = x <= hi
	case ")":
		upper = x < hi
	default:
		return false, fmt.Errorf("%q: <range-in> must end with ) or ]", spec)
	}
	return lower && upper, nil
}

func pyFloatOf(v specValue) (float64, error) {
	if v.isNum {
		return v.num, nil
	}
	return pyFloat(v.str)
}

// pyFloat parses like Python's float(): surrounding whitespace, a sign,
// decimal digits with single underscores between them, an exponent,
// inf/infinity/nan in any case; no hexadecimal.
func pyFloat(s string) (float64, error) {
	t := strings.TrimFunc(s, unicode.IsSpace)
	body := strings.TrimLeft(t, "+-")
	if len(t)-len(body) > 1 {
		return 0, fmt.Errorf("%w: %q is not a number", errSpecType, s)
	}
	switch strings.ToLower(body) {
	case "inf", "infinity":
		if strings.HasPrefix(t, "-") {
			return math.Inf(-1), nil
		}
		return math.Inf(1), nil
	case "nan":
		return math.NaN(), nil
	}
	clean, ok := pyconv.Digits(body, "0123456789.eE+-")
	if !ok || clean == "" || strings.ContainsAny(clean, "xXpP") {
		return 0, fmt.Errorf("%w: %q is not a number", errSpecType, s)
	}
	f, err := strconv.ParseFloat(t[:len(t)-len(body)]+clean, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return 0, fmt.Errorf("%w: %q is not a number", errSpecType, s)
	}
	return f, nil
}

// pyLiteralNumber is ast.literal_eval restricted to what can come out as a
// number: decimal, 0x/0o/0b integers and floats, with an optional minus.
func pyLiteralNumber(s string) (float64, error) {
	body := strings.TrimPrefix(s, "-")
	neg := len(body) != len(s)
	lower := strings.ToLower(body)
	for _, p := range []struct {
		prefix string
		base   int
	}{{"0x", 16}, {"0o", 8}, {"0b", 2}} {
		if strings.HasPrefix(lower, p.prefix) {
			digits := strings.ReplaceAll(lower[2:], "_", "")
			n, err := strconv.ParseUint(digits, p.base, 64)
			if err != nil || digits == "" {
				return 0, fmt.Errorf("%w: %q is not a literal number", errSpecType, s)
			}
			if neg {
				return -float64(n), nil
			}
			return float64(n), nil
		}
	}
	if strings.ContainsAny(lower, "in") || strings.TrimSpace(s) != s || s == "" {
		// inf/nan are names, not literals, to literal_eval.
		return 0, fmt.Errorf("%w: %q is not a literal number", errSpecType, s)
	}
	return pyFloat(s)
}
