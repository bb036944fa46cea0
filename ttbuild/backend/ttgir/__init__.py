"""TTGIR transforms of the ttgir stage: layout assignment (coalesce), software pipelining (pipeline), and the pass driver."""
