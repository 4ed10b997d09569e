// Package awscloud looks AMIs up with EC2 (EC2, and the credentials it reads) for aws.Images,
// and holds a static list of AMIs (Static) for offline planning and tests. It is the only
// package of bootimage/ that links the AWS SDK's service clients.
package awscloud

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	configv1 "github.com/openshift/api/config/v1"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	bootaws "github.com/bootimage-operator/bootimage-operator/bootimage/aws"
)

// Static is a fixed list of AMIs, as `bootimagectl plan --aws-images` reads it. It knows no GCP
// images, so GCP pre-flight checks are skipped.
type Static struct {
	AMIs []bootaws.Image
	// Source names where the list comes from; an AMI not in it is said to be missing there, an
	// error, since nothing says whether EC2 has it.
	Source string
}

// describeImagesOutput is the output of `aws ec2 describe-images`: one region's images, without it.
type describeImagesOutput struct {
	Images []struct {
		ImageID, OwnerID, Name, Description, CreationDate, State string
		StateReason                                              *struct{ Message string }
		Tags                                                     []struct{ Key, Value string }
	} `json:"Images"`
}

// LoadStatic reads the AMIs of path: the output of `aws ec2 describe-images` ({"Images": [...]},
// whose images match any region, AMI ids being unique across regions), or a JSON array of
// bootaws.Image, strictly.
func LoadStatic(path string) (*Static, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	s := &Static{Source: path}
	if trimmed := strings.TrimSpace(string(data)); strings.HasPrefix(trimmed, "{") {
		var out describeImagesOutput
		if err := json.Unmarshal(data, &out); err != nil || out.Images == nil {
			return nil, fmt.Errorf("%s: not the output of aws ec2 describe-images ({\"Images\": [...]}): %v", path, cmpErr(err, "no Images"))
		}
		for _, img := range out.Images {
			ami := bootaws.Image{ImageID: img.ImageID, OwnerID: img.OwnerID, Name: img.Name,
				Description: img.Description, CreationDate: img.CreationDate, State: img.State}
			if img.StateReason != nil {
				ami.StateReason = img.StateReason.Message
			}
			for _, t := range img.Tags {
				if ami.Tags == nil {
					ami.Tags = map[string]string{}
				}
				ami.Tags[t.Key] = t.Value
			}
			s.AMIs = append(s.AMIs, ami)
		}
		return s, nil
	}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s.AMIs); err != nil {
		return nil, fmt.Errorf("%s: neither the output of aws ec2 describe-images nor a JSON array of {imageId, ownerId, name, description, creationDate, region, state, stateReason, tags}: %v", path, err)
	}
	return s, nil
}

func cmpErr(err error, otherwise string) string {
	if err != nil {
		return err.Error()
	}
	return otherwise
}

// AWSImage implements bootimage.Catalog. An AMI not in the list is an error naming the list.
func (s *Static) Image(_ context.Context, region, id string) (*bootaws.Image, error) {
	for i := range s.AMIs {
		if s.AMIs[i].ImageID == id && (s.AMIs[i].Region == region || s.AMIs[i].Region == "") {
			img := s.AMIs[i]
			img.Region = region
			return &img, nil
		}
	}
	if s.Source != "" {
		return nil, fmt.Errorf("AMI %s in %s is not in %s (EC2 was not asked)", id, region, s.Source)
	}
	return nil, nil
}

// Tagged implements aws.Images: the listed AMIs of region carrying every tag.
func (s *Static) Tagged(_ context.Context, region string, tags map[string]string) ([]bootaws.Image, error) {
	var out []bootaws.Image
	for _, img := range s.AMIs {
		if img.Region != region && img.Region != "" {
			continue
		}
		matches := true
		for k, v := range tags {
			matches = matches && img.Tags[k] == v
		}
		if matches {
			img.Region = region
			out = append(out, img)
		}
	}
	return out, nil
}

// AWSMarketplaceImages implements bootimage.Catalog.
func (s *Static) MarketplaceImages(_ context.Context, region, product string) ([]bootaws.Image, error) {
	var out []bootaws.Image
	for _, img := range s.AMIs {
		if (img.Region == region || img.Region == "") && img.OwnerID == bootaws.MarketplaceOwner && strings.Contains(img.Name, product) {
			out = append(out, img)
		}
	}
	return out, nil
}

// Clouds returns s as the cluster's AWS image lookups.
func (s *Static) Clouds() bootimage.Clouds {
	return bootimage.Clouds{configv1.AWSPlatformType: s}
}
