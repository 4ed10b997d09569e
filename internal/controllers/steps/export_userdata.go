package steps

import (
	"context"
	"time"

	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/internal/kube"
)

// UpgradeUserDataForTest writes the upgraded stub of read, as a boot image update does. It is the
// body of the hook of the same name in package controllers' export_test.go, whose specs cannot
// reach upgradeUserData; the operator itself never calls it.
func UpgradeUserDataForTest(ctx context.Context, c client.Client, recorder record.EventRecorder, read *bootimage.UserData) error {
	stub, from, err := bootimage.UpgradeUserData(read)
	if err != nil {
		return err
	}
	return upgradeUserData(ctx, c, recorder, time.Now(), kube.MachineAPINamespace, read, bootimage.Decision{UserData: stub, UserDataVersion: from})
}
