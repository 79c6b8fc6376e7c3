"""numpy's PCG64 streams and exponential draws, vectorised over many keys.

:func:`exponential_rows` returns, for M keys (seed, purpose, round, client), what
``rng_for(seed, purpose, round=r, client=c).exponential(1.0, size=n)`` draws,
bit for bit, as numpy arrays: no ``Generator`` per key. It is for keys that
draw a few numbers each (the hierarchy's subchannel fading: one or K_e draws per
device and round), where building or re-seeding a generator per key costs far
more than the draws.

How: each key's PCG64 state comes from :func:`rayfl.seeding._state_words` (the
``SeedSequence`` hash, vectorised). The 128-bit LCG steps run on (high, low)
uint64 columns, the 64-bit products split into 32-bit halves; the output is
PCG64's XSL-RR. numpy's ``random_standard_exponential`` then takes the draw's
53 high bits as ``ri`` and bits 3–10 as the ziggurat layer, and returns
``ri · we[layer]`` when ``ri < ke[layer]`` (~99 % of draws). A key with any
other draw (the ziggurat's tail or wedge, which may take more numbers) is drawn
again by numpy's own generator, so every row is numpy's whatever the tables.

The tables ``ke`` and ``we`` are numpy's ``ke_double`` and ``we_double``
(numpy/random/src/distributions/ziggurat_constants.h, BSD-3-Clause). On first
use the columns are compared with numpy's generators on fixed keys; if numpy's
generator ever changed, every key takes numpy's generator (a warning says so).
tests/test_pcg_columns.py checks random keys, tail draws and the fallback.

Example:
    >>> from rayfl.seeding import rng_for
    >>> rows = exponential_rows(7, "hier_subchannel_fading", rounds=[3, 4], clients=2, size=2)
    >>> want = [rng_for(7, "hier_subchannel_fading", round=r, client=2).exponential(1.0, 2)
    ...         for r in (3, 4)]
    >>> bool((rows == np.array(want)).all())
    True
"""

from __future__ import annotations

import functools
import warnings

import numpy as np
import numpy.typing as npt

from rayfl.seeding import _PCG_MULT, _key_rows, _state_words, rng_reseeded

__all__ = ["exponential_rows"]

_LOW32 = np.uint64(0xFFFFFFFF)
_M_HI, _M_LO = np.uint64(_PCG_MULT >> 64), np.uint64(_PCG_MULT & ((1 << 64) - 1))


def exponential_rows(
    seed: npt.ArrayLike | int,
    purpose: str,
    *,
    rounds: npt.ArrayLike | int = 0,
    clients: npt.ArrayLike | int = 0,
    size: int = 1,
) -> npt.NDArray[np.float64]:
    """Row i: key i's ``rng_for(...).exponential(1.0, size)``, float64 (M, size).

    Args:
        seed: The run's seed, or each key's.
        purpose: One of :data:`rayfl.seeding.PURPOSES`.
        rounds: Round index of each key, or one for all.
        clients: Client id of each key, or one for all.
        size: Draws per key (≥ 0).

    Raises:
        KeyError: If ``purpose`` is unknown.
        ValueError: If ``size`` is negative.
    """
    if int(size) < 0:
        raise ValueError(f"size must be >= 0, got {size}")
    size = int(size)
    (s, r, c), keys = _key_rows(seed, purpose, rounds, clients)
    out = np.empty((len(s), size))
    if keys is None or not _columns_agree():
        redo = np.arange(len(s))
    else:
        out, ok = _fast_rows(_state_words(keys), size)
        redo = np.flatnonzero(~ok)
    if len(redo):
        rngs = rng_reseeded(s[redo], purpose, rounds=r[redo], clients=c[redo])
        for i in redo.tolist():
            out[i] = next(rngs).exponential(1.0, size)
    return out


def _mul64(
    a: npt.NDArray[np.uint64], b: np.uint64
) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint64]]:
    """The 128-bit product a·b as (high, low) uint64 words."""
    a0, a1 = a & _LOW32, a >> np.uint64(32)
    b0, b1 = b & _LOW32, b >> np.uint64(32)
    p00, p01, p10, p11 = a0 * b0, a0 * b1, a1 * b0, a1 * b1
    mid = (p00 >> np.uint64(32)) + (p01 & _LOW32) + (p10 & _LOW32)
    low = (p00 & _LOW32) | (mid << np.uint64(32))
    high = (
        p11 + (p01 >> np.uint64(32)) + (p10 >> np.uint64(32)) + (mid >> np.uint64(32))
    )
    return high, low


def _step(
    hi: npt.NDArray[np.uint64],
    lo: npt.NDArray[np.uint64],
    inc_hi: npt.NDArray[np.uint64],
    inc_lo: npt.NDArray[np.uint64],
) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint64]]:
    """One LCG step: state · PCG64's multiplier + inc (mod 2¹²⁸)."""
    ph, pl = _mul64(lo, _M_LO)
    ph = ph + hi * _M_LO + lo * _M_HI
    lo2 = pl + inc_lo
    carry = (lo2 < pl).astype(np.uint64)
    return ph + inc_hi + carry, lo2


def _fast_rows(
    words: npt.NDArray[np.uint64], size: int
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
    """Each key's first ``size`` exponential draws, and whether all took the fast path."""
    with np.errstate(over="ignore"):
        w0, w1, w2, w3 = (np.ascontiguousarray(words[:, i]) for i in range(4))
        one = np.uint64(1)
        inc_hi = (w2 << one) | (w3 >> np.uint64(63))
        inc_lo = (w3 << one) | one
        # PCG64's seeding: state = 0; step; state += initstate; step
        lo = w1 + inc_lo
        hi = w0 + inc_hi + (lo < w1).astype(np.uint64)
        hi, lo = _step(hi, lo, inc_hi, inc_lo)
        out = np.empty((len(words), size))
        ok = np.ones(len(words), dtype=bool)
        for j in range(size):
            hi, lo = _step(hi, lo, inc_hi, inc_lo)
            rot = hi >> np.uint64(58)
            x = hi ^ lo
            draw = (x >> rot) | (x << ((np.uint64(64) - rot) & np.uint64(63)))
            ri = draw >> np.uint64(3)
            layer = (ri & np.uint64(0xFF)).astype(np.intp)
            ri >>= np.uint64(8)
            out[:, j] = ri.astype(np.float64) * _WE[layer]
            ok &= ri < _KE[layer]
    return out, ok


@functools.cache
def _columns_agree() -> bool:
    """Whether the columns draw numpy's numbers on fixed keys (checked once)."""
    from rayfl.seeding import rng_for

    seeds, rounds = np.arange(64) * 7919, np.arange(64) % 5
    keys = _key_rows(seeds, "hier_subchannel_fading", rounds, np.arange(64))[1]
    assert keys is not None
    got, ok = _fast_rows(_state_words(keys), 3)
    for i in np.flatnonzero(ok).tolist():
        rng = rng_for(
            int(seeds[i]), "hier_subchannel_fading", round=int(rounds[i]), client=i
        )
        if not np.array_equal(got[i], rng.exponential(1.0, 3)):
            warnings.warn(
                "rayfl.pcg_columns: numpy's PCG64 or exponential draws changed; "
                "every key now takes numpy's generator (slower, same numbers)",
                RuntimeWarning,
                stacklevel=3,
            )
            return False
    return bool(ok.any())


# numpy's tables (ziggurat_constants.h), one entry per ziggurat layer
# fmt: off
#: numpy's ``ke_double`` (acceptance bounds of the 53-bit draw), by layer.
_KE = np.array(
    [
        0x001C5214272497C6, 0x0000000000000000, 0x00137D5BD79C317E, 0x00186EF58E3F3C10,
        0x001A9BB7320EB0AE, 0x001BD127F719447C, 0x001C951D0F88651A, 0x001D1BFE2D5C3972,
        0x001D7E5BD56B18B2, 0x001DC934DD172C70, 0x001E0409DFAC9DC8, 0x001E337B71D47836,
        0x001E5A8B177CB7A2, 0x001E7B42096F046C, 0x001E970DAF08AE3E, 0x001EAEF5B14EF09E,
        0x001EC3BD07B46556, 0x001ED5F6F08799CE, 0x001EE614AE6E5688, 0x001EF46ECA361CD0,
        0x001F014B76DDD4A4, 0x001F0CE313A796B6, 0x001F176369F1F77A, 0x001F20F20C452570,
        0x001F29AE1951A874, 0x001F31B18FB95532, 0x001F39125157C106, 0x001F3FE2EB6E694C,
        0x001F463332D788FA, 0x001F4C10BF1D3A0E, 0x001F51874C5C3322, 0x001F56A109C3ECC0,
        0x001F5B66D9099996, 0x001F5FE08210D08C, 0x001F6414DD445772, 0x001F6809F6859678,
        0x001F6BC52A2B02E6, 0x001F6F4B3D32E4F4, 0x001F72A07190F13A, 0x001F75C8974D09D6,
        0x001F78C71B045CC0, 0x001F7B9F12413FF4, 0x001F7E5346079F8A, 0x001F80E63BE21138,
        0x001F835A3DAD9162, 0x001F85B16056B912, 0x001F87ED89B24262, 0x001F8A10759374FA,
        0x001F8C1BBA3D39AC, 0x001F8E10CC45D04A, 0x001F8FF102013E16, 0x001F91BD968358E0,
        0x001F9377AC47AFD8, 0x001F95204F8B64DA, 0x001F96B878633892, 0x001F98410C968892,
        0x001F99BAE146BA80, 0x001F9B26BC697F00, 0x001F9C85561B717A, 0x001F9DD759CFD802,
        0x001F9F1D6761A1CE, 0x001FA058140936C0, 0x001FA187EB3A3338, 0x001FA2AD6F6BC4FC,
        0x001FA3C91ACE0682, 0x001FA4DB5FEE6AA2, 0x001FA5E4AA4D097C, 0x001FA6E55EE46782,
        0x001FA7DDDCA51EC4, 0x001FA8CE7CE6A874, 0x001FA9B793CE5FEE, 0x001FAA9970ADB858,
        0x001FAB745E588232, 0x001FAC48A3740584, 0x001FAD1682BF9FE8, 0x001FADDE3B5782C0,
        0x001FAEA008F21D6C, 0x001FAF5C2418B07E, 0x001FB012C25B7A12, 0x001FB0C41681DFF4,
        0x001FB17050B6F1FA, 0x001FB2179EB2963A, 0x001FB2BA2BDFA84A, 0x001FB358217F4E18,
        0x001FB3F1A6C9BE0C, 0x001FB486E10CACD6, 0x001FB517F3C793FC, 0x001FB5A500C5FDAA,
        0x001FB62E2837FE58, 0x001FB6B388C9010A, 0x001FB7353FB50798, 0x001FB7B368DC7DA8,
        0x001FB82E1ED6BA08, 0x001FB8A57B0347F6, 0x001FB919959A0F74, 0x001FB98A85BA7204,
        0x001FB9F861796F26, 0x001FBA633DEEE286, 0x001FBACB2F41EC16, 0x001FBB3048B49144,
        0x001FBB929CAEA4E2, 0x001FBBF23CC8029E, 0x001FBC4F39D22994, 0x001FBCA9A3E140D4,
        0x001FBD018A548F9E, 0x001FBD56FBDE729C, 0x001FBDAA068BD66A, 0x001FBDFAB7CB3F40,
        0x001FBE491C7364DE, 0x001FBE9540C9695E, 0x001FBEDF3086B128, 0x001FBF26F6DE6174,
        0x001FBF6C9E828AE2, 0x001FBFB031A904C4, 0x001FBFF1BA0FFDB0, 0x001FC03141024588,
        0x001FC06ECF5B54B2, 0x001FC0AA6D8B1426, 0x001FC0E42399698A, 0x001FC11BF9298A64,
        0x001FC151F57D1942, 0x001FC1861F770F4A, 0x001FC1B87D9E74B4, 0x001FC1E91620EA42,
        0x001FC217EED505DE, 0x001FC2450D3C83FE, 0x001FC27076864FC2, 0x001FC29A2F90630E,
        0x001FC2C23CE98046, 0x001FC2E8A2D2C6B4, 0x001FC30D654122EC, 0x001FC33087DE9C0E,
        0x001FC3520E0B7EC6, 0x001FC371FADF66F8, 0x001FC390512A2886, 0x001FC3AD137497FA,
        0x001FC3C844013348, 0x001FC3E1E4CCAB40, 0x001FC3F9F78E4DA8, 0x001FC4107DB85060,
        0x001FC4257877FD68, 0x001FC438E8B5BFC6, 0x001FC44ACF15112A, 0x001FC45B2BF447E8,
        0x001FC469FF6C4504, 0x001FC477495001B2, 0x001FC483092BFBB8, 0x001FC48D3E457FF6,
        0x001FC495E799D21A, 0x001FC49D03DD30B0, 0x001FC4A29179B432, 0x001FC4A68E8E07FC,
        0x001FC4A8F8EBFB8C, 0x001FC4A9CE16EA9E, 0x001FC4A90B41FA34, 0x001FC4A6AD4E28A0,
        0x001FC4A2B0C82E74, 0x001FC49D11E62DE2, 0x001FC495CC852DF4, 0x001FC48CDC265EC0,
        0x001FC4823BEC237A, 0x001FC475E696DEE6, 0x001FC467D6817E82, 0x001FC458059DC036,
        0x001FC4466D702E20, 0x001FC433070BCB98, 0x001FC41DCB0D6E0E, 0x001FC406B196BBF6,
        0x001FC3EDB248CB62, 0x001FC3D2C43E593C, 0x001FC3B5DE0591B4, 0x001FC396F599614C,
        0x001FC376005A4592, 0x001FC352F3069370, 0x001FC32DC1B22818, 0x001FC3065FBD7888,
        0x001FC2DCBFCBF262, 0x001FC2B0D3B99F9E, 0x001FC2828C8FFCF0, 0x001FC251DA79F164,
        0x001FC21EACB6D39E, 0x001FC1E8F18C6756, 0x001FC1B09637BB3C, 0x001FC17586DCCD10,
        0x001FC137AE74D6B6, 0x001FC0F6F6BB2414, 0x001FC0B348184DA4, 0x001FC06C898BAFF0,
        0x001FC022A092F364, 0x001FBFD5710F72B8, 0x001FBF84DD29488E, 0x001FBF30C52FC60A,
        0x001FBED907770CC6, 0x001FBE7D80327DDA, 0x001FBE1E094BA614, 0x001FBDBA7A354408,
        0x001FBD52A7B9F826, 0x001FBCE663C6201A, 0x001FBC757D2C4DE4, 0x001FBBFFBF63B7AA,
        0x001FBB84F23FE6A2, 0x001FBB04D9A0D18C, 0x001FBA7F351A70AC, 0x001FB9F3BF92B618,
        0x001FB9622ED4ABFC, 0x001FB8CA33174A16, 0x001FB82B76765B54, 0x001FB7859C5B895C,
        0x001FB6D840D55594, 0x001FB622F7D96942, 0x001FB5654C6F37E0, 0x001FB49EBFBF69D2,
        0x001FB3CEC803E746, 0x001FB2F4CF539C3E, 0x001FB21032442852, 0x001FB1203E5A9604,
        0x001FB0243042E1C2, 0x001FAF1B31C479A6, 0x001FAE045767E104, 0x001FACDE9DBF2D72,
        0x001FABA8E640060A, 0x001FAA61F399FF28, 0x001FA908656F66A2, 0x001FA79AB3508D3C,
        0x001FA61726D1F214, 0x001FA47BD48BEA00, 0x001FA2C693C5C094, 0x001FA0F4F47DF314,
        0x001F9F04336BBE0A, 0x001F9CF12B79F9BC, 0x001F9AB84415ABC4, 0x001F98555B782FB8,
        0x001F95C3ABD03F78, 0x001F92FDA9CEF1F2, 0x001F8FFCDA9AE41C, 0x001F8CB99E7385F8,
        0x001F892AEC479606, 0x001F8545F904DB8E, 0x001F80FDC336039A, 0x001F7C427839E926,
        0x001F7700A3582ACC, 0x001F71200F1A241C, 0x001F6A8234B7352A, 0x001F630000A8E266,
        0x001F5A66904FE3C4, 0x001F50724ECE1172, 0x001F44C7665C6FDA, 0x001F36E5A38A59A2,
        0x001F26143450340A, 0x001F113E047B0414, 0x001EF6AEFA57CBE6, 0x001ED38CA188151E,
        0x001EA2A61E122DB0, 0x001E5961C78B267C, 0x001DDDF62BAC0BB0, 0x001CDB4DD9E4E8C0,
    ],
    dtype=np.uint64,
)
#: numpy's ``we_double`` (layer widths: the draw is ``ri · we[layer]``).
_WE = np.array(
    [
        9.655740063209183e-16, 7.089014243955414e-18, 1.1639412496691224e-17,
        1.524391512353216e-17, 1.833284885723744e-17, 2.1089651094644866e-17,
        2.3611280778431382e-17, 2.595595772310894e-17, 2.8161735541977523e-17,
        3.0255041303213823e-17, 3.225508254836375e-17, 3.417632340185027e-17,
        3.6029969787344525e-17, 3.782490776869649e-17, 3.956832198097553e-17,
        4.1266117781759464e-17, 4.2923218084425256e-17, 4.4543777432823714e-17,
        4.613133981483186e-17, 4.768895725264636e-17, 4.921928043727963e-17,
        5.072462904503147e-17, 5.220704702792672e-17, 5.366834661718192e-17,
        5.511014372835095e-17, 5.653388673239667e-17, 5.794088004852767e-17,
        5.933230365208943e-17, 6.07092293284718e-17, 6.207263431163193e-17,
        6.342341280303077e-17, 6.476238575956142e-17, 6.609030925769405e-17,
        6.740788167872722e-17, 6.871574991183812e-17, 7.00145147340393e-17,
        7.130473549660643e-17, 7.258693422414648e-17, 7.386159921381792e-17,
        7.512918820723728e-17, 7.639013119550826e-17, 7.764483290797848e-17,
        7.88936750272979e-17, 8.013701816675454e-17, 8.137520364041762e-17,
        8.260855505210038e-17, 8.383737972539139e-17, 8.506196999385323e-17,
        8.628260436784113e-17, 8.749954859216183e-17, 8.871305660690252e-17,
        8.992337142215357e-17, 9.113072591597909e-17, 9.233534356381788e-17,
        9.353743910649129e-17, 9.47372191631295e-17, 9.593488279457997e-17,
        9.713062202221521e-17, 9.832462230649511e-17, 9.951706298915072e-17,
        1.0070811770242949e-16, 1.0189795474846941e-16, 1.030867374515422e-16,
        1.0427462448561886e-16, 1.0546177017945764e-16, 1.0664832480119147e-16,
        1.0783443482419485e-16, 1.0902024317583505e-16, 1.1020588947055781e-16,
        1.1139151022861975e-16, 1.1257723908165675e-16, 1.1376320696616847e-16,
        1.1494954230590093e-16, 1.1613637118402183e-16, 1.1732381750590458e-16,
        1.1851200315326694e-16, 1.1970104813034652e-16, 1.2089107070273855e-16,
        1.2208218752947062e-16, 1.2327451378884152e-16, 1.2446816329851125e-16,
        1.2566324863028985e-16, 1.2685988122003975e-16, 1.2805817147307494e-16,
        1.2925822886541196e-16, 1.3046016204120288e-16, 1.3166407890665726e-16,
        1.328700867207381e-16, 1.3407829218289994e-16, 1.3528880151811755e-16,
        1.3650172055943978e-16, 1.377171548282881e-16, 1.389352096127064e-16,
        1.4015599004375715e-16, 1.4137960117024852e-16, 1.4260614803196654e-16,
        1.4383573573157902e-16, 1.4506846950536877e-16, 1.4630445479294757e-16,
        1.4754379730609516e-16, 1.487866030968626e-16, 1.500329786250737e-16,
        1.5128303082535394e-16, 1.5253686717381255e-16, 1.537945957544997e-16,
        1.5505632532575771e-16, 1.5632216538658375e-16, 1.5759222624311761e-16,
        1.5886661907536842e-16, 1.6014545600429167e-16, 1.6142885015932787e-16,
        1.6271691574651305e-16, 1.640097681172718e-16, 1.653075238380037e-16,
        1.666103007605742e-16, 1.6791821809382289e-16, 1.6923139647620223e-16,
        1.7054995804966298e-16, 1.7187402653490317e-16, 1.7320372730810084e-16,
        1.745391874792534e-16, 1.7588053597224914e-16, 1.7722790360680065e-16,
        1.7858142318237326e-16, 1.7994122956424637e-16, 1.8130745977185016e-16,
        1.8268025306952523e-16, 1.8405975105985878e-16, 1.8544609777975695e-16,
        1.8683943979941927e-16, 1.882399263243892e-16, 1.8964770930086167e-16,
        1.9106294352443765e-16, 1.9248578675252438e-16, 1.9391639982058994e-16,
        1.9535494676249091e-16, 1.9680159493510374e-16, 1.982565151475019e-16,
        1.997198817949342e-16, 2.0119187299787347e-16, 2.0267267074641983e-16,
        2.0416246105035888e-16, 2.0566143409519179e-16, 2.071697844044737e-16,
        2.0868771100881597e-16, 2.1021541762192928e-16, 2.117531128241076e-16,
        2.133010102535779e-16, 2.1485932880616633e-16, 2.1642829284376047e-16,
        2.180081324120784e-16, 2.1959908346828707e-16, 2.212013881190496e-16,
        2.2281529486961805e-16, 2.2444105888463086e-16, 2.2607894226131737e-16,
        2.277292143158621e-16, 2.2939215188373114e-16, 2.3106803963482133e-16,
        2.3275717040435346e-16, 2.344598455404958e-16, 2.361763752697774e-16,
        2.3790707908142767e-16, 2.3965228613186235e-16, 2.4141233567062933e-16,
        2.431875774892256e-16, 2.44978372394307e-16, 2.4678509270692887e-16,
        2.4860812278958517e-16, 2.504478596029557e-16, 2.523047132944217e-16,
        2.541791078205812e-16, 2.560714816061771e-16, 2.579822882420531e-16,
        2.599119972249747e-16, 2.618610947423924e-16, 2.638300845054943e-16,
        2.658194886341845e-16, 2.678298485979525e-16, 2.698617262169489e-16,
        2.7191570472798185e-16, 2.739923899205815e-16, 2.760924113487617e-16,
        2.782164236246436e-16, 2.8036510780069835e-16, 2.825391728480253e-16,
        2.847393572388174e-16, 2.8696643064198177e-16, 2.8922119574179956e-16,
        2.915044901905293e-16, 2.9381718870700286e-16, 2.9616020533454657e-16,
        2.9853449587300453e-16, 3.009410605012618e-16, 3.0338094660850034e-16,
        3.058552518544861e-16, 3.08365127481531e-16, 3.1091178190342663e-16,
        3.134964845996663e-16, 3.1612057034671057e-16, 3.187854438219713e-16,
        3.2149258462067974e-16, 3.2424355273094516e-16, 3.2703999451822404e-16,
        3.298836492772283e-16, 3.3277635641716714e-16, 3.357200633553244e-16,
        3.387168342045505e-16, 3.417688593525637e-16, 3.448784660453424e-16,
        3.4804813010374423e-16, 3.5128048892229794e-16, 3.545783559224792e-16,
        3.5794473666042765e-16, 3.6138284682190606e-16, 3.6489613237645425e-16,
        3.6848829220956213e-16, 3.7216330360802073e-16, 3.7592545104162565e-16,
        3.7977935876688744e-16, 3.8373002787892137e-16, 3.8778287856078953e-16,
        3.919437984311429e-16, 3.962191980786775e-16, 4.0061607510565417e-16,
        4.051420882956573e-16, 4.0980564389030625e-16, 4.1461599642909046e-16,
        4.195833672073399e-16, 4.247190841824385e-16, 4.3003574816674707e-16,
        4.355474314693952e-16, 4.41269916903607e-16, 4.472209874259932e-16,
        4.534207798565834e-16, 4.598922204905932e-16, 4.666615664711476e-16,
        4.737590853262492e-16, 4.812199172829238e-16, 4.89085182739221e-16,
        4.97403423619194e-16, 5.06232507214416e-16, 5.156421828878083e-16,
        5.257175802022275e-16, 5.365640977112022e-16, 5.483144034258704e-16,
        5.61138745467516e-16, 5.752606481503332e-16, 5.909817641652103e-16,
        6.087231416180908e-16, 6.290979034877557e-16, 6.530492053564041e-16,
        6.821393079028929e-16, 7.192444966089362e-16, 7.706095350032097e-16,
        8.545517038584027e-16,
    ]
)
# fmt: on
