"""The frontend: Python source → canonical kernel JSON (parse stage) → TTIR (ttir stage); never imports kernel files."""
