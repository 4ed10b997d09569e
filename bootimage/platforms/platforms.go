// Package platforms registers every platform whose boot images are managed. A platform is a
// folder of bootimage/ (its decision, its cloud lookups, its facts) and one line here; a binary
// that decides boot images imports this package once.
package platforms

import (
	_ "github.com/bootimage-operator/bootimage-operator/bootimage/aws"
	_ "github.com/bootimage-operator/bootimage-operator/bootimage/azure"
	_ "github.com/bootimage-operator/bootimage-operator/bootimage/gcp"
	_ "github.com/bootimage-operator/bootimage-operator/bootimage/vsphere"
)
