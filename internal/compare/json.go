package compare

import (
	"encoding/json"
	"fmt"
	"io"
)

// WriteJSON writes r as indented JSON, the machine form of the report.
func WriteJSON(w io.Writer, r *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("compare: write json: %w", err)
	}
	return nil
}
