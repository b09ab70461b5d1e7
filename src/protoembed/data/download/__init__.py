"""``protoembed data``: the dataset registry (:mod:`.registry`), fetching with resume and checksums
(:mod:`.fetch`), unpacking (:mod:`.unpack`), installing atomically (:mod:`.install`) and the records of
what is installed (:mod:`.installed`, :mod:`.manifest`)."""
