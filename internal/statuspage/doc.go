// Package statuspage tests the admin listener's status page as a person meets it: a real
// otlpgate process with one working and one dead destination, traffic flowing, and the page
// loaded in a real headless Chromium (chromedp), read for what it shows.
//
// It has no code outside its tests, imports nothing of otlpgate but generated protobuf types and
// internal/otlpgen, and nothing imports it.
package statuspage
