"""Flow-table conventions of the fabric controller, shared with the harness (which reads the
switches' tables back with ``ovs-ofctl``): entry priorities and cookies. Importing this module
pulls in nothing of os-ken."""
PRIO_CE, PRIO_ROUTE, PRIO_ARP = 20, 10, 100
COOKIE_ROUTE, COOKIE_CE = 0x10, 0xCE
