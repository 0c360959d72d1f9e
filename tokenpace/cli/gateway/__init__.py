"""The gateway's commands: `gateway` (serve it) and `arms` (judge its gray release)."""
