package console

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aerie-run/aerie/runner/store"
)

// overviewDays is how many days back the overview goes by default, and at
// most.
const (
	overviewDays    = 14
	overviewMaxDays = 90
)

// series is one line of a chart: a value per day.
type series struct {
	Name   string    `json:"name"`
	Values []float64 `json:"values"`
}

// chart is one chart of the overview.
type chart struct {
	ID     string   `json:"id"`
	Title  string   `json:"title"`
	Unit   string   `json:"unit"`
	Series []series `json:"series"`
}

// overview is the data of the overview: per day (Days, at midnight UTC,
// in Unix seconds), the sessions created by namespace, and the tokens and
// cost by model, of the sessions created that day.
type overview struct {
	Title  string   `json:"-"`
	Days   []int64  `json:"days"`
	Labels []string `json:"-"`
	Charts []chart  `json:"charts"`
}

func (s *Server) overview(r *http.Request) (overview, error) {
	days, _ := strconv.Atoi(r.URL.Query().Get("days"))
	if days <= 0 || days > overviewMaxDays {
		days = overviewDays
	}
	today := s.now().UTC().Truncate(24 * time.Hour)
	first := today.AddDate(0, 0, -(days - 1))
	o := overview{Title: "Overview"}
	for i := range days {
		d := first.AddDate(0, 0, i)
		o.Days = append(o.Days, d.Unix())
		o.Labels = append(o.Labels, d.Format("Jan 2"))
	}
	byNS, tokens, cost := map[string][]float64{}, map[string][]float64{}, map[string][]float64{}
	add := func(m map[string][]float64, key string, day int, v float64) {
		if m[key] == nil {
			m[key] = make([]float64, days)
		}
		m[key][day] += v
	}
	for _, tenant := range s.o.Tenants {
		list, err := s.o.Store.List(r.Context(), tenant, store.ListOptions{})
		if err != nil {
			return overview{}, err
		}
		for _, sess := range list {
			if sess.CreatedAt.Before(first) {
				continue
			}
			day := int(sess.CreatedAt.UTC().Sub(first) / (24 * time.Hour))
			if day >= days {
				continue
			}
			add(byNS, tenant, day, 1)
			_, snap, err := s.o.Store.Load(r.Context(), tenant, sess.ID)
			if err != nil || snap.Usage == nil {
				continue
			}
			model := snap.Settings.Model
			if model == "" {
				model = "(default)"
			}
			add(tokens, model, day, float64(snap.Usage.InputTokens+snap.Usage.OutputTokens))
			add(cost, model, day, snap.Usage.CostUSD)
		}
	}
	o.Charts = []chart{
		{ID: "sessions-by-namespace", Title: "Sessions by namespace", Unit: "sessions", Series: seriesOf(byNS)},
		{ID: "tokens-by-model", Title: "Tokens (input + output) by model", Unit: "tokens", Series: seriesOf(tokens)},
		{ID: "cost-by-model", Title: "Cost by model", Unit: "USD", Series: seriesOf(cost)},
	}
	return o, nil
}

func seriesOf(m map[string][]float64) []series {
	out := make([]series, 0, len(m))
	for name, v := range m {
		out = append(out, series{Name: name, Values: v})
	}
	slices.SortFunc(out, func(a, b series) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// overviewPage shows the overview as tables, which the script draws as
// charts.
func (s *Server) overviewPage(w http.ResponseWriter, r *http.Request) {
	o, err := s.overview(r)
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, "The session store could not be read.", err)
		return
	}
	s.render(w, r, http.StatusOK, "overview", o)
}

// overviewData serves the overview's data as JSON, for the charts.
func (s *Server) overviewData(w http.ResponseWriter, r *http.Request) {
	o, err := s.overview(r)
	if err != nil {
		http.Error(w, "the session store could not be read", http.StatusInternalServerError)
		s.o.Log.Error("overview", "error", err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(o)
}
