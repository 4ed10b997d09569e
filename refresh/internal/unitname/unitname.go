// Package unitname checks systemd unit names as node disruption policies accept them.
package unitname

import (
	"fmt"
	"regexp"
)

// Letters, digits and :._\- with a unit suffix, at most 255 characters.
var valid = regexp.MustCompile(`^[a-zA-Z0-9:._\\-]+\.(service|socket|device|mount|automount|swap|target|path|timer|snapshot|slice|scope)$`)

// Validate reports whether name is a valid unit name for a policy action.
func Validate(name string) error {
	if len(name) > 255 || !valid.MatchString(name) {
		return fmt.Errorf("invalid service name %q: letters, digits and :._- with a unit suffix such as .service, at most 255 characters", name)
	}
	return nil
}
