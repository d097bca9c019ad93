//! Write-ahead log (being written).
