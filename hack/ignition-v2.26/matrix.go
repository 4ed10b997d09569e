// Package matrix imports the refresh packages so that this module's go.sum covers them; run
// `go test github.com/bootimage-operator/bootimage-operator/refresh/...` here.
package matrix

import (
	_ "github.com/bootimage-operator/bootimage-operator/refresh"
	_ "github.com/bootimage-operator/bootimage-operator/refresh/hypershift"
	_ "github.com/bootimage-operator/bootimage-operator/refresh/pool"
	_ "github.com/bootimage-operator/bootimage-operator/refresh/render"
)
