"""The security stores' file names (a leaf module): start-up looks for them without importing the stores."""

SCRAM_FILE = "tidelog-scram-credentials.json"
ACL_FILE = "tidelog-acls.json"
