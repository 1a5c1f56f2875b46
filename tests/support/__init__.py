"""Local stand-ins for network services, so the real clients can be tested without network or keys."""
