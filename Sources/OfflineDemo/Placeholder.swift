// The demo scenarios live here.
