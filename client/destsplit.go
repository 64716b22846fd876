package client

import (
	"errors"
	"strings"
)

// A -dest value is items separated by commas. A value that holds a comma (a header such as
// authorization:Basic a,b, a resource attribute's value) is written in double quotes right
// after its key's =: key="a,b". Inside the quotes \" stands for a quote and \\ for a
// backslash; a quote anywhere else is an ordinary character. One splitter serves -dest
// flags and -dest.file lines alike, so both read a value the same way.

// ErrUnterminatedQuote refuses a -dest value whose quoted value has no closing quote.
var ErrUnterminatedQuote = errors.New("a value opened with \" has no closing quote")

// SplitDest returns the items of a -dest value, cut at each comma outside a quoted value,
// each as written (quotes and escapes kept: Unquote reads a value). It refuses a quoted value
// that is not closed.
func SplitDest(spec string) ([]string, error) {
	var items []string
	start := 0
	for i := 0; i < len(spec); i++ {
		switch spec[i] {
		case ',':
			items = append(items, spec[start:i])
			start = i + 1
		case '=':
			j := i + 1
			for j < len(spec) && spec[j] == ' ' {
				j++
			}
			if j == len(spec) || spec[j] != '"' || strings.Contains(spec[start:i], "=") {
				continue // not a value's first character, or = inside a value
			}
			end, ok := closingQuote(spec, j)
			if !ok {
				return nil, ErrUnterminatedQuote
			}
			i = end
		}
	}
	return append(items, spec[start:]), nil
}

// closingQuote returns the index of the quote that closes the one at spec[open].
func closingQuote(spec string, open int) (int, bool) {
	for i := open + 1; i < len(spec); i++ {
		switch spec[i] {
		case '\\':
			i++
		case '"':
			return i, true
		}
	}
	return 0, false
}

// Unquote returns a -dest item's value as meant: a value in double quotes without them and
// with its escapes read, any other as given. Text after the closing quote is refused.
func Unquote(v string) (string, error) {
	if !strings.HasPrefix(v, "\"") {
		return v, nil
	}
	end, ok := closingQuote(v, 0)
	if !ok {
		return "", ErrUnterminatedQuote
	}
	if strings.TrimSpace(v[end+1:]) != "" {
		return "", errors.New("text after a quoted value's closing quote")
	}
	var b strings.Builder
	for i := 1; i < end; i++ {
		if v[i] == '\\' {
			i++
		}
		b.WriteByte(v[i])
	}
	return b.String(), nil
}

// DestItems is SplitDest for a value whose errors ParseDest reports, or shown only (RedactDest):
// with an unterminated quote it cuts at every comma.
func DestItems(spec string) []string {
	items, err := SplitDest(spec)
	if err != nil {
		return strings.Split(spec, ",")
	}
	return items
}
