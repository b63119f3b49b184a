package node

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/fedgate/fedgate/node/peerapi"
	"github.com/fedgate/fedgate/regionstate"
	"github.com/fedgate/fedgate/store"
)

// A region's identity. When a region forms, its first node records a
// random id in Raft (regionstate.SetRegionID), and every node claims the
// default store for the region by writing a marker there. A node refuses:
//
//   - to start on a data dir whose region differs from the one that
//     claimed the shared default store (a node started without --join
//     formed a second region of the same name on the store: two regions
//     writing one store overwrite each other's objects);
//   - to add to its region (`fedgate cluster add`, a join) a node that
//     belongs to another region (it would then answer from its own state:
//     one region, two answers).

// regionMarkerKey is where a store records the region it is the default
// store of. Bucket names never start with '.', so no bucket's keys meet it.
func regionMarkerKey(region string) string { return "_fedgate/region-" + region + ".json" }

// legacyRegionMarkerKey is where builds before the store health checks
// wrote the marker. ".fedgate/" is reserved by the GCS and Azure stores,
// so a region whose default store was one of them could not start; it is
// still read (where the store allows the key) so an older marker counts.
func legacyRegionMarkerKey(region string) string { return ".fedgate/region-" + region + ".json" }

// regionMarker is the marker's content.
type regionMarker struct {
	RegionID string    `json:"region_id"`
	Region   string    `json:"region"`
	Node     string    `json:"claimed_by"`
	Created  time.Time `json:"created"`
}

// ensureRegionID returns the region's id, recording a new one first when
// the region has none (it just formed, or it formed before ids existed).
// Of founding nodes racing, the first to commit wins.
func ensureRegionID(ctx context.Context, rn *regionstate.Node) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var err error
	for try := 0; ; try++ {
		if id := rn.State().RegionID(); id != "" {
			return id, nil
		}
		if _, err = rn.ApplyIndex(ctx, regionstate.SetRegionID{ID: store.RandomID()}); err == nil {
			continue // applied here: the state has it
		}
		// Another founding node's id won (ErrRegionIDSet), or the
		// leader changed in flight: wait for the state to show one.
		if serr := joinBackoff.Sleep(ctx, try+1); serr != nil {
			return "", fmt.Errorf("record the region's id: %w (last error: %v)", serr, err)
		}
	}
}

// claimStore makes sure st, the region's default store, is claimed by
// this region: it writes the marker when there is none (If-None-Match,
// so of two regions racing one wins) and refuses a marker of another.
func claimStore(ctx context.Context, st store.Store, dataDir string, m regionMarker) error {
	key := regionMarkerKey(m.Region)
	for try := 0; try < 3; try++ {
		where := key
		cur, err := readMarker(ctx, st, key)
		if errors.Is(err, store.ErrNotFound) {
			old, lerr := readMarker(ctx, st, legacyRegionMarkerKey(m.Region))
			switch {
			case lerr == nil:
				cur, err, where = old, nil, legacyRegionMarkerKey(m.Region)
				if old.RegionID == m.RegionID {
					err = store.ErrNotFound // ours: write it where it belongs now
				}
			case !errors.Is(lerr, store.ErrNotFound) && !errors.Is(lerr, store.ErrInvalidKey):
				err = lerr
			}
		}
		switch {
		case errors.Is(err, store.ErrNotFound):
			body, _ := json.Marshal(m)
			_, err := st.Put(ctx, key, bytes.NewReader(body), int64(len(body)), store.PutOptions{IfNoneMatch: true})
			if errors.Is(err, store.ErrPreconditionFailed) {
				continue // another node wrote one first: read it
			}
			if err != nil {
				return fmt.Errorf("claim store %q for region %q: write %s: %w", st.Name(), m.Region, key, err)
			}
			return nil
		case err != nil:
			return fmt.Errorf("claim store %q for region %q: read %s: %w", st.Name(), m.Region, key, err)
		case cur.RegionID == m.RegionID:
			return nil
		default:
			return fmt.Errorf("refusing to start: the default store %q belongs to another region named %q (id %s, claimed by node %s on %s), "+
				"but this node's data dir %s holds a region of its own (id %s). It was probably started once without --join, "+
				"so it formed a second region on the shared store; two regions writing one store overwrite each other's objects. "+
				"To make this node part of the existing region: stop it, empty its --data-dir, and start it with --join ADDR "+
				"(the S3 address of a node of that region); --join alone is ignored while the data dir holds Raft state. "+
				"If the store really changed hands, delete %s from it first",
				st.Name(), cur.Region, cur.RegionID, cur.Node, cur.Created.Format(time.RFC3339), dataDir, m.RegionID, where)
		}
	}
	return fmt.Errorf("claim store %q for region %q: the marker %s kept changing", st.Name(), m.Region, key)
}

func readMarker(ctx context.Context, st store.Store, key string) (regionMarker, error) {
	var m regionMarker
	info, err := st.Stat(ctx, key)
	if err != nil {
		return m, err
	}
	if info.Size > 64<<10 {
		return m, fmt.Errorf("%s is %d bytes, not a region marker", key, info.Size)
	}
	rc, err := st.ReadRange(ctx, key, 0, info.Size, "")
	if err != nil {
		return m, err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(b, &m); err != nil || m.RegionID == "" {
		return m, fmt.Errorf("%s is not a region marker (%v)", key, err)
	}
	return m, nil
}

// otherRegion explains why a node that reported in (its info) cannot be
// added to this region ("" when it can).
func otherRegion(self string, in peerapi.Info, ours string) string {
	if in.RegionID != "" && ours != "" && in.RegionID != ours {
		return fmt.Sprintf("node %s belongs to another region (id %s; this region, through %s, is %s): it was started without --join and formed "+
			"its own region, or it is a member of another one. Adding it would give one region two answers. To add it: stop it, empty its "+
			"--data-dir, and start it with --join pointing at this region", in.ID, in.RegionID, self, ours)
	}
	return ""
}
