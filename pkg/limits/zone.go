package limits

import (
	"strings"

	"github.com/envoy-rls/envoy-rls/internal/suggest"
)

// zoneProblem says why name is no time zone, with the name meant when a
// change of case or of spaces for underscores makes one, or when one of
// the common zones is near it.
func zoneProblem(name string, err error) string {
	msg := "unknown time zone " + quote(name) + " (want an IANA name such as Europe/Berlin or America/New_York)"
	if strings.EqualFold(name, "local") {
		return err.Error()
	}
	if fixed := fixZoneCase(name); fixed != name {
		if _, err := LoadZone(fixed); err == nil {
			return msg + ", did you mean " + fixed + "?"
		}
	}
	return suggest.DidYouMean(msg, name, commonZones)
}

func quote(s string) string { return `"` + s + `"` }

// fixZoneCase spells name as IANA names are: each word capitalised, words
// joined by underscores ("america/new york" is America/New_York).
func fixZoneCase(name string) string {
	parts := strings.Split(strings.TrimSpace(name), "/")
	for i, p := range parts {
		words := strings.Fields(strings.ReplaceAll(p, "_", " "))
		for k, w := range words {
			if len(w) <= 3 && i == 0 && len(parts) == 1 {
				words[k] = strings.ToUpper(w) // UTC, EST, CET
				continue
			}
			words[k] = strings.ToUpper(w[:1]) + strings.ToLower(w[1:])
		}
		parts[i] = strings.Join(words, "_")
	}
	return strings.Join(parts, "/")
}

// commonZones are the zones a typo is compared with: the commonest of the
// IANA database, which has no list a program can read.
var commonZones = []string{
	"UTC",
	"Europe/London", "Europe/Dublin", "Europe/Lisbon", "Europe/Paris", "Europe/Berlin",
	"Europe/Madrid", "Europe/Rome", "Europe/Amsterdam", "Europe/Brussels", "Europe/Vienna",
	"Europe/Zurich", "Europe/Stockholm", "Europe/Oslo", "Europe/Copenhagen", "Europe/Helsinki",
	"Europe/Warsaw", "Europe/Prague", "Europe/Budapest", "Europe/Athens", "Europe/Istanbul",
	"Europe/Kyiv", "Europe/Moscow",
	"America/New_York", "America/Chicago", "America/Denver", "America/Phoenix",
	"America/Los_Angeles", "America/Anchorage", "America/Toronto", "America/Vancouver",
	"America/Mexico_City", "America/Bogota", "America/Lima", "America/Santiago",
	"America/Sao_Paulo", "America/Argentina/Buenos_Aires", "America/Halifax",
	"Pacific/Honolulu", "Pacific/Auckland", "Pacific/Apia", "Pacific/Fiji",
	"Asia/Tokyo", "Asia/Seoul", "Asia/Shanghai", "Asia/Hong_Kong", "Asia/Taipei",
	"Asia/Singapore", "Asia/Kolkata", "Asia/Dubai", "Asia/Jakarta", "Asia/Bangkok",
	"Asia/Manila", "Asia/Karachi", "Asia/Dhaka", "Asia/Tehran", "Asia/Jerusalem",
	"Australia/Sydney", "Australia/Melbourne", "Australia/Brisbane", "Australia/Perth",
	"Australia/Adelaide", "Australia/Lord_Howe",
	"Africa/Cairo", "Africa/Johannesburg", "Africa/Lagos", "Africa/Nairobi", "Africa/Casablanca",
}
