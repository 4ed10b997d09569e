// Package cloud holds the image catalogues bootimage.Decide consults: EC2 and GCP compute through
// their SDKs, and a static list for offline planning and tests.
package cloud

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
)

// Static is a fixed list of AMIs, as `bootimagectl plan --aws-images` reads it. It knows no GCP
// images, so GCP pre-flight checks are skipped.
type Static struct {
	AMIs []bootimage.AWSImage
}

// LoadStatic reads a JSON array of AMIs from path.
func LoadStatic(path string) (*Static, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	s := &Static{}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s.AMIs); err != nil {
		return nil, fmt.Errorf("%s: not a JSON array of {imageId, ownerId, name, description, creationDate, region, state}: %v", path, err)
	}
	return s, nil
}

// AWSImage implements bootimage.Catalog.
func (s *Static) AWSImage(_ context.Context, region, id string) (*bootimage.AWSImage, error) {
	for i := range s.AMIs {
		if s.AMIs[i].ImageID == id && s.AMIs[i].Region == region {
			img := s.AMIs[i]
			return &img, nil
		}
	}
	return nil, nil
}

// AWSMarketplaceImages implements bootimage.Catalog.
func (s *Static) AWSMarketplaceImages(_ context.Context, region, product string) ([]bootimage.AWSImage, error) {
	var out []bootimage.AWSImage
	for _, img := range s.AMIs {
		if img.Region == region && img.OwnerID == bootimage.MarketplaceOwner && strings.Contains(img.Name, product) {
			out = append(out, img)
		}
	}
	return out, nil
}

// GCPImage implements bootimage.Catalog: a static list has no GCP images.
func (s *Static) GCPImage(context.Context, string, string) (*bootimage.GCPImage, error) {
	return nil, bootimage.ErrNoCatalog
}
